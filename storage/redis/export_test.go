package redis

// The store's metadata keys, for the tests of this directory.

func (s *Store) SynchronizedOnKey() string { return s.syncedOnKey }
func (s *Store) CursorKey() string         { return s.cursorKey }
