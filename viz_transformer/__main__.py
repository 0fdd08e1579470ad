"""`python -m viz_transformer ...`: see cli.py."""
import sys

from .cli import main

sys.exit(main())
