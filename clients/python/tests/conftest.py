import os
import sys

# Tests run against the source tree, installed or not.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
