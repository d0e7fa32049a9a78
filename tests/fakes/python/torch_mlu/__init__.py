# A stand-in for Cambricon's torch_mlu in hetpool's tests (issue 62): importing it, and its GPU
# migration module, is all the launch adapter does on a Cambricon node. This one records that the
# migration was switched on, in FAKE_TORCH_MLU_MARKS/migrated-<RANK>, and maps nothing itself.
