"""Stand-in for s3fs (not in Debian trixie) and every module under it: S3 log directories
only; see README.md."""

import sys

from _standin import package

package(sys.modules[__name__])
