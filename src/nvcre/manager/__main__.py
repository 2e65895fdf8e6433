"""``python -m nvcre.manager``: same as ``nvcre-manager``."""

from nvcre.manager.main import main

main()
