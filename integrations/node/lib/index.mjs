// The ES module entry: the same implementation as the CommonJS one (it holds no state of its
// own, so loading both is harmless).
import cjs from './index.js';

export const { BigsegBigSegmentStore, BigsegError, DEFAULT_BASE_URL, DEFAULT_TIMEOUT_MS, DEFAULT_MAX_REFS, DEFAULT_MAX_REF_BYTES } =
  cjs;
