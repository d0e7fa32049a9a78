# A card with uncorrectable ECC errors, as the CUDA runtime shows it to every process that uses
# it: the first card any run of this script is given becomes the bad one (its id is written under
# the test's run directory), and every run on it dies the way PyTorch reports the fault. Runs on
# the other cards do a little work and succeed. What the script stands in for is the hardware,
# not a user's code: a user's script touching a bad card dies exactly like this.
import os
import sys
import time

visible = os.environ.get("CUDA_VISIBLE_DEVICES", "?")
marker = os.path.join(os.environ["HPTEST_RUN_MARK"], "bad-card")
try:
    fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, visible.encode())
    os.close(fd)
except FileExistsError:
    pass
with open(marker) as f:
    bad = f.read().strip()
print(f"step 1 on card {visible}", flush=True)
if visible == bad:
    raise RuntimeError("CUDA error: uncorrectable ECC error encountered")
time.sleep(0.2)
print("done", flush=True)
