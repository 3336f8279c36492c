// Command ceiling is the HTTP stack's limit for the benchmark: a bare chi server answering
// bigseg's lookup route with a fixed body of the same size, on the same http.Server settings,
// doing nothing else.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	size := flag.Int("body-size", 200, "bytes in each response body")
	flag.Parse()

	body := []byte(`{"contextKey":"x","padding":"` + strings.Repeat("x", max(*size-32, 0)) + `"}` + "\n")
	body = body[len(body)-*size:] // exactly size bytes; the content does not matter
	r := chi.NewRouter()
	r.Get("/memberships/{contextKey}", func(w http.ResponseWriter, r *http.Request) {
		_ = chi.URLParam(r, "contextKey")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("listening on %s", ln.Addr())
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 15 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	log.Fatal(srv.Serve(ln))
}
