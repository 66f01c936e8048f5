"""``attnkit demo``: a built-in task trained start to finish (dates, or captions of digit scenes)."""
