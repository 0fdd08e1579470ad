"""`python -m viz_transformer ...`: see cli.py."""
import sys

from viz_transformer.cli import main

sys.exit(main())
