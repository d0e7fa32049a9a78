# Cambricon's GPU migration is switched on by importing this module (torch_mlu.utils.gpu_migration);
# the fake records the import, with the torch it was imported after.
import os
import sys

marks = os.environ.get("FAKE_TORCH_MLU_MARKS")
if marks:
    with open(os.path.join(marks, "migrated-" + os.environ.get("RANK", "none")), "w") as f:
        f.write("torch imported first\n" if "torch" in sys.modules else "torch not imported\n")
