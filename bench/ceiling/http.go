package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
)

// headerFlags collects repeated -header 'Name: value' flags.
type headerFlags http.Header

func (h headerFlags) String() string { return fmt.Sprint(http.Header(h)) }

func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("header %q: want 'Name: value'", v)
	}
	http.Header(h).Add(textproto.TrimString(name), textproto.TrimString(value))
	return nil
}

// serveHTTP answers GET /memberships/{contextKey} with the same body and headers every time,
// until ctx ends. Header values are shared by every response, as bigseg shares its own: the
// cheapest a Go HTTP server can answer this route.
func serveHTTP(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("ceiling http", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	bodyFile := fs.String("body-file", "", "file holding the response body")
	pprofAddr := fs.String("pprof-addr", "", "serve Go's /debug/pprof on this address too (bench/paired -p)")
	headers := headerFlags{}
	fs.Var(headers, "header", "response header 'Name: value' (repeatable); Content-Length is set from the body")
	if err := fs.Parse(args); err != nil {
		return err
	}
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		return err
	}
	headers["Content-Length"] = []string{strconv.Itoa(len(body))}

	r := chi.NewRouter()
	r.Get("/memberships/{contextKey}", func(w http.ResponseWriter, r *http.Request) {
		_ = chi.URLParam(r, "contextKey")
		h := w.Header()
		for name, values := range headers {
			h[name] = values
		}
		_, _ = w.Write(body)
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if *pprofAddr != "" {
		stop, err := servePprof(*pprofAddr)
		if err != nil {
			return err
		}
		defer stop()
	}
	// bigseg's default http.Server settings.
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 15 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "listening on %s\n", ln.Addr())
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// servePprof serves Go's CPU profile at addr/debug/pprof/profile until stop is called.
func servePprof(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}
