#!/bin/sh
# A stand-in torchrun: prints what a real torchrun printed for a failure (the file named by
# HPTEST_REPLAY, e.g. torchrun 2.11's output captured on an H200) and exits 1, as torchrun does
# whichever way a rank failed. Its arguments (torchrun's flags and the job's program) are ignored.
cat "$HPTEST_REPLAY"
exit 1
