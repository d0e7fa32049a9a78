// A fake FlagCX (libflagcx.so): only the entry point discovery calls. Built into its own folder so
// that only tests that ask for it see a cross-vendor collective installed.
#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT int flagcxGetVersion(int* version) {
  *version = 300;  // flagcxSuccess with a version, as FlagCX v0.3 answers
  return 0;
}
