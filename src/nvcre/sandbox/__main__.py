"""``python -m nvcre.sandbox up|down|status``: the same commands as ``nvcrectl sandbox``."""

from nvcre.sandbox.commands import sandbox_group

sandbox_group(prog_name="python -m nvcre.sandbox")
