// Package resp is bigseg's Redis-protocol listener: it answers the three reads a LaunchDarkly
// SDK's own Redis Big Segment store makes (GET of the synchronization time, SMEMBERS of a
// context's include and exclude sets) from the segments service, so that an SDK in any
// language reads bigseg with no code of ours. It is a sibling of package handlers: it looks
// contexts up in the segments.Environment of each key prefix, and takes its defences from
// packages auth and limit.
// commands.go lists every command it answers; reader.go reads them, each within a bound of
// 16 KiB whatever a client declares or sends; answers are sent every 32 KiB, a large one in
// pieces as it is made, so that a connection holds a buffer of fixed size whatever it asks.
//
// It speaks RESP2 (a client asking HELLO 3 is told NOPROTO and falls back, as with a Redis
// older than 6), presents itself as a standalone Redis with one database, and writes nothing
// anywhere: every command but its reads and the clients' housekeeping is an error.
package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tidwall/redcon"
	"go.opentelemetry.io/otel/trace"

	"github.com/bigseg/bigseg/internal/auth"
	"github.com/bigseg/bigseg/internal/limit"
	"github.com/bigseg/bigseg/segments"
)

// Bounds of what one client may make the listener hold.
const (
	// maxCommandBytes bounds one command (or pipelined batch of them) as it arrives: the
	// longest bigseg answers (AUTH with a token, a key with a long prefix) are far shorter.
	maxCommandBytes = 16 << 10
	// maxArgs bounds a command's arguments (HELLO 2 AUTH user token SETNAME name: seven).
	maxArgs = 8
	// flushBytes is how much of the answers to a pipelined batch, or of one large answer, is
	// kept before it is sent.
	flushBytes = 32 << 10
	// maxAuthFailures is the failed AUTHs after which a connection is closed.
	maxAuthFailures = 3
)

// Defaults of Config's timeouts.
const (
	DefaultReadTimeout  = 5 * time.Second
	DefaultWriteTimeout = 5 * time.Second
)

// Config is what the listener is given; zero values mean the defaults, or none.
type Config struct {
	Version string       // named in HELLO and INFO
	Log     *slog.Logger // default: discarded

	Tokens    *auth.Tokens    // with tokens enabled, AUTH with one is required, which must open the environment read
	Listener  *limit.Listener // told when a connection is busy, to make room at its limit
	TLSConfig *tls.Config     // with it, Serve serves TLS (rediss://), as http.Server's

	IdleTimeout  time.Duration // how long a connection may wait for its next command; 0: no bound
	ReadTimeout  time.Duration // how long a command may take to arrive once begun
	WriteTimeout time.Duration // how long answers may take to be taken

	// Observe is told about every command answered: its name (from a fixed set, else
	// "other"), whether it answered an error, and how long it took.
	Observe func(command string, failed bool, d time.Duration)

	// TracerProvider, when set, makes a server span of every command, named by the command
	// (from the same fixed set, else OTHER), with no argument ever; nil for none.
	TracerProvider trace.TracerProvider
}

// Server is the listener's server: Serve runs it, Shutdown stops it.
type Server struct {
	cfg    Config
	keys   keys
	tracer trace.Tracer // nil: no spans

	draining atomic.Bool
	ids      atomic.Int64
	wg       sync.WaitGroup // every connection's goroutine
	mu       sync.Mutex
	ln       net.Listener
	conns    map[*conn]struct{}
}

// New returns a server over the environments envs (at least one), each read under its prefix,
// as tokens' scopes name it.
func New(cfg Config, envs ...*segments.Environment) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Observe == nil {
		cfg.Observe = func(string, bool, time.Duration) {}
	}
	s := &Server{cfg: cfg, keys: newKeys(envs), conns: make(map[*conn]struct{})}
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer("github.com/bigseg/bigseg/resp")
	}
	return s
}

// Serve answers the connections of ln until Shutdown or Close (even one called before Serve
// began); it returns nil then, or Accept's error (a listener closed otherwise included), and
// closes ln either way. An Accept that fails for a while (EMFILE:
// out of file descriptors) is retried after a pause that grows to acceptRetryMax, as net/http
// does, instead of ending the listener for good.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.TLSConfig != nil {
		ln = tls.NewListener(ln, s.cfg.TLSConfig)
	}
	s.mu.Lock()
	s.ln = ln
	draining := s.draining.Load()
	s.mu.Unlock()
	if draining { // Shutdown came first: it found no listener to close
		ln.Close()
		return nil
	}
	defer ln.Close() // as net/http does: a listener that stopped serving takes no connection
	var pause time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.draining.Load() { // a listener closed by anyone else is a failure, as net/http has it
				return nil
			}
			if !temporary(err) {
				return fmt.Errorf("accept: %w", err)
			}
			pause = min(max(2*pause, 5*time.Millisecond), acceptRetryMax)
			s.cfg.Log.Warn("Redis-protocol listener: accept failed; retrying", "err", err.Error(), "in", pause.String())
			time.Sleep(pause)
			continue
		}
		pause = 0
		c := &conn{nc: nc, id: s.ids.Add(1)}
		c.gone, c.leave = context.WithCancel(context.Background())
		s.mu.Lock()
		if s.draining.Load() { // Shutdown has looked at the connections, and may be waiting for them
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1) // under the lock, so never once Shutdown waits
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serve(c)
		}()
	}
}

// acceptRetryMax is the longest pause before an Accept that failed is tried again.
const acceptRetryMax = time.Second

// temporary says whether an Accept error may pass: too many open files in the process or the
// system, or any other error the net package calls temporary.
func temporary(err error) bool {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
		return true
	}
	var ne interface{ Temporary() bool }
	return errors.As(err, &ne) && ne.Temporary()
}

// Shutdown stops accepting connections, lets each finish the commands it is answering, then
// closes it; connections waiting for a command are closed at once. It returns once every
// connection is closed, or ctx ends (then it closes them all).
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		if !c.busy.Load() {
			_ = c.nc.SetReadDeadline(time.Now()) // wakes its read: it sees the drain and ends
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Close()
		<-done
		return ctx.Err()
	}
}

// Close closes the listener and every connection at once.
func (s *Server) Close() {
	s.draining.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
}

// conn is one client connection and what it has said of itself.
type conn struct {
	nc      net.Conn
	ctx     context.Context // of the command being answered: its span's, when traced
	gone    context.Context // ends when the client is found gone (watch) or the connection ends
	leave   context.CancelFunc
	watchMu sync.Mutex  // held to arm, disarm and run watcher
	watcher *time.Timer // peeks at the connection while a command waits (see watch)
	waiting bool
	id      int64
	busy    atomic.Bool
	out     []byte        // answers not yet sent
	session *auth.Session // the token of its AUTH, with tokens required
	failed  int           // AUTHs that failed
	name    string
	now     time.Time // when the command being answered began
	last    lookup    // the lookup of the command being answered, if an SMEMBERS
	prev    lookup    // that of the command before: see (*Server).smembers
	closing bool      // QUIT or too many failed AUTHs: close once the answers are sent
	// sentPiece says that part of the answer being made was sent already (see sendPiece).
	sentPiece bool
}

// serve reads and answers c's commands until it closes, fails, or the server drains.
func (s *Server) serve(c *conn) {
	defer func() {
		c.leave()
		c.nc.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	cc := limit.NewCommandConn(c.nc, maxCommandBytes, s.cfg.ReadTimeout)
	rd := newReader(cc, maxCommandBytes)
	idle := s.cfg.ReadTimeout // a client sends its first command as it connects
	for {
		if err := next(cc, rd, idle); err != nil || s.draining.Load() {
			return
		}
		idle = s.cfg.IdleTimeout
		cmds, err := rd.next()
		if err != nil {
			s.readFailed(c, err)
			return
		}
		c.busy.Store(true)
		s.busy(c, true)
		for _, args := range cmds {
			s.dispatch(c, args)
			if c.gone.Err() != nil { // its client has gone: the rest of its pipeline with it
				return
			}
			// The answer of a command that waited (for the store) is sent at once: to a client
			// that has gone, the write fails by the next one, which ends the pipeline it left
			// (whose bytes, still unread, hide its close from watch's peek).
			if len(c.out) >= flushBytes || c.closing || time.Since(c.now) >= watchEvery {
				if !s.flush(c) || c.closing {
					return
				}
			}
		}
		ok := s.flush(c)
		c.busy.Store(false)
		s.busy(c, false)
		if !ok {
			return
		}
	}
}

// next begins the connection's next command: it may take up to idle to begin, unless its first bytes came
// with the commands before it (a pipeline cut in the middle of one): it has begun then, and the
// rest of it must come within the read timeout.
func next(cc *limit.CommandConn, rd *reader, idle time.Duration) error {
	if rd.begun() {
		return cc.Begun()
	}
	return cc.Next(idle)
}

func (s *Server) busy(c *conn, busy bool) {
	if s.cfg.Listener != nil {
		s.cfg.Listener.Busy(c.nc, busy)
	}
}

// readFailed answers a command that could not be read, if the client can still be told.
func (s *Server) readFailed(c *conn, err error) {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne):
		return
	case errors.Is(err, limit.ErrCommandTooLong):
		c.out = redcon.AppendError(c.out, "ERR "+err.Error()+": bigseg answers only short commands")
	default: // the protocol's own errors
		c.out = redcon.AppendError(c.out, "ERR "+err.Error())
	}
	s.cfg.Observe("other", true, 0)
	s.flush(c)
}

// flush sends the answers kept, within the write timeout: a client that takes none of them
// loses its connection then.
func (s *Server) flush(c *conn) bool {
	if len(c.out) == 0 {
		return true
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	_, err := c.nc.Write(c.out)
	if c.last.env != nil { // the last command's answer, a lookup's, is written: see (*Server).smembers
		c.last.written = time.Now()
	}
	if cap(c.out) > 2*flushBytes {
		c.out = nil // let a large buffer go
	} else {
		c.out = c.out[:0]
	}
	return err == nil
}

// sendPiece sends the answers kept, the beginning of the one being made among them, so that
// however large an answer (or one of its refs) is the connection holds at most twice
// flushBytes of it before sending it, each piece within the write timeout. It returns false, the connection
// then to be closed, if the piece could not be sent.
func (s *Server) sendPiece(c *conn) bool {
	c.sentPiece = true
	if !s.flush(c) {
		c.closing = true
		return false
	}
	return true
}
