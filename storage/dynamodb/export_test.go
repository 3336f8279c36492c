package dynamodb

// SetQueryPage makes Load query n items a page, so that tests see several pages.
func SetQueryPage(s *Store, n int32) { s.queryPage = n }
