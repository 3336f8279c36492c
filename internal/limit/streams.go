package limit

import "net/http"

// Streams is middleware that bounds the requests that hold their connection open for long
// (status streams) to n at once; beyond it, a request is refused with 503 and Retry-After.
// Bound it with Listener.MaxStreams, so that streams cannot take every connection.
func Streams(n int, refuse Refuse) func(http.Handler) http.Handler {
	slots := make(chan struct{}, max(n, 0))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				next.ServeHTTP(w, r)
			default:
				w.Header().Set("Retry-After", "5")
				refuse(w, r, http.StatusServiceUnavailable, "too many status streams open; retry later, or poll /status")
			}
		})
	}
}

// MaxStreams is n held to half of the listener's connections: an open stream is a connection
// in use, which the listener never closes to make room, so more streams than that could take
// every connection and lock other clients out.
func (l *Listener) MaxStreams(n int) int { return min(n, l.max/2) }
