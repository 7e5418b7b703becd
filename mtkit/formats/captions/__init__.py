"""Subtitles: SubRip and WebVTT files (subtitles.py) and the text of a cue with its styling tags
(subtitle_text.py)."""
