package redis_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bigseg/bigseg/internal/redistest"
	"github.com/bigseg/bigseg/storage/redis"
)

// lockedBuffer is a log destination that go-redis's goroutines and the test may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// go-redis's own lines go to the logger SetLogger was last given, at debug level: the caller's
// level decides whether they are written. A SET with a TTL under a millisecond makes go-redis
// log that it rounds it up.
func TestSetLoggerSendsGoRedisLines(t *testing.T) {
	c := redistest.Client(t)
	key := redistest.Prefix(t, c) + ":ttl"
	t.Cleanup(func() { redis.SetLogger(nil) })
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var out lockedBuffer
		redis.SetLogger(slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: level})))
		if err := c.Set(context.Background(), key, "x", 500*time.Microsecond).Err(); err != nil {
			t.Fatal(err)
		}
		logged := strings.Contains(out.String(), `"msg":"go-redis: specified duration is 500µs`)
		if logged != (level == slog.LevelDebug) {
			t.Errorf("at level %v, logged %v: %q", level, logged, out.String())
		}
	}
}
