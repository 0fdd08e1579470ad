"""What every page shares: the context, the sidebar, widgets, callbacks, language and strings, lesson mode and the lesson file format, the page registry."""
