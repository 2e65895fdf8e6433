"""``python -m nvcre.expected [--check]``: see :mod:`nvcre.expected.docs`."""

import sys

from nvcre.expected.docs import main

sys.exit(main())
