"""Stand-in for acp (not in Debian trixie) and every module under it: see README.md."""

import sys

from _standin import package

package(sys.modules[__name__])
