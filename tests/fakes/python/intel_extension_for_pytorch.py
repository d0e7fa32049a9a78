# A stand-in for Intel's intel_extension_for_pytorch in hetpool's tests (issue 62): the launch
# adapter imports it right after torch, as Intel documents. It records the import in
# FAKE_IPEX_MARKS/imported-<RANK>.
import os
import sys

marks = os.environ.get("FAKE_IPEX_MARKS")
if marks:
    with open(os.path.join(marks, "imported-" + os.environ.get("RANK", "none")), "w") as f:
        f.write("torch imported first\n" if "torch" in sys.modules else "torch not imported\n")
