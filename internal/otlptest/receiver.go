// Package otlptest is an OTLP receiver for tests: it listens as a collector does, over gRPC and
// over HTTP (http/protobuf, or JSON; gzip-encoded bodies too), decodes every export with the
// protobufs of go.opentelemetry.io/proto/otlp and keeps it, and can misbehave the ways a
// collector does (answer unavailable, hang, be slow, answer garbage), so that tests see what a
// program really sends and what it does when its collector fails.
//
// A Receiver runs in the test's process; Main runs one as a program (a test binary
// re-executed, or bench/otlpreceiver), writing every Record as a JSON line, and StartProcess
// runs such a program and reads its lines back into a Received, so that a test can run the
// receiver as a process of its own: what the program under test sends then crosses a real
// socket to a real process, and a hanging receiver holds nothing of the test.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // exporters may compress (OTEL_EXPORTER_OTLP_COMPRESSION)
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Fault is how a receiver answers exports.
type Fault string

// The faults. Every export is decoded and recorded whatever the fault, with the fault's name.
const (
	OK          Fault = ""            // answer success
	Unavailable Fault = "unavailable" // HTTP 503 with Retry-After, gRPC UNAVAILABLE
	Hang        Fault = "hang"        // never answer (until the client gives up or the receiver closes)
	Garbage     Fault = "garbage"     // HTTP 200 with random bytes as the body; on gRPC, random bytes for the connection's first answer
)

// ParseFault returns the fault named s ("", "ok", "unavailable", "hang", "garbage").
func ParseFault(s string) (Fault, error) {
	switch f := Fault(s); f {
	case OK, Unavailable, Hang, Garbage:
		return f, nil
	case "ok":
		return OK, nil
	}
	return "", fmt.Errorf("unknown fault %q: want ok, unavailable, hang or garbage", s)
}

// Options configure a Receiver.
type Options struct {
	GRPCAddr, HTTPAddr string        // where to listen; default 127.0.0.1:0, a free port
	Fault              Fault         // how to answer
	Delay              time.Duration // how long to wait before answering (a slow collector)
	Out                io.Writer     // if set, every Record as a JSON line
}

// Receiver is an OTLP receiver listening on two ports, gRPC and HTTP. Close stops it.
type Receiver struct {
	*Received
	GRPCAddr, HTTPAddr string // host:port

	opts    Options
	outMu   sync.Mutex
	closing chan struct{} // closed by Close: hanging and delayed answers end
	grpc    *grpc.Server
	http    *http.Server
	lns     []net.Listener
	wg      sync.WaitGroup
}

// Start starts a receiver.
func Start(opts Options) (_ *Receiver, err error) {
	r := &Receiver{Received: newReceived(), opts: opts, closing: make(chan struct{})}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	grpcLn, err := r.listen("grpc", opts.GRPCAddr)
	if err != nil {
		return nil, err
	}
	httpLn, err := r.listen("http", opts.HTTPAddr)
	if err != nil {
		return nil, err
	}
	r.GRPCAddr, r.HTTPAddr = grpcLn.Addr().String(), httpLn.Addr().String()
	r.http = &http.Server{Handler: r.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	r.grpc = grpc.NewServer(grpc.WaitForHandlers(true))
	coltracepb.RegisterTraceServiceServer(r.grpc, traceService{r: r})
	colmetricspb.RegisterMetricsServiceServer(r.grpc, metricsService{r: r})
	r.wg.Go(func() { r.http.Serve(httpLn) })
	if opts.Fault == Garbage {
		r.wg.Go(func() { r.serveGarbage(grpcLn) })
	} else {
		r.wg.Go(func() { r.grpc.Serve(grpcLn) })
	}
	if err := r.record(Record{Event: EventListening, GRPC: r.GRPCAddr, HTTP: r.HTTPAddr}); err != nil {
		return nil, err
	}
	return r, nil
}

// listen listens on addr (a free loopback port if empty), recording every connection accepted.
func (r *Receiver) listen(name, addr string) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", name, err)
	}
	r.lns = append(r.lns, ln)
	return &countingListener{Listener: ln, accepted: func() { r.record(Record{Event: EventConnection, Listener: name}) }}, nil
}

// Close stops the receiver: it closes the listeners and every connection, ends the answers
// hanging or delayed, and waits for its goroutines.
func (r *Receiver) Close() error {
	select {
	case <-r.closing:
		return nil
	default:
	}
	close(r.closing)
	if r.http != nil {
		r.http.Close()
	}
	if r.grpc != nil {
		r.grpc.Stop()
	}
	for _, ln := range r.lns {
		ln.Close()
	}
	r.wg.Wait()
	return nil
}

// record keeps rec and writes it to Out.
func (r *Receiver) record(rec Record) error {
	if err := r.add(rec); err != nil {
		return err
	}
	if r.opts.Out == nil {
		return nil
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	r.outMu.Lock()
	defer r.outMu.Unlock()
	_, err = r.opts.Out.Write(append(line, '\n'))
	return err
}

// export records a decoded request, then waits as the fault and delay say. It returns false
// when the answer is not to be given (Hang, or the receiver closing).
func (r *Receiver) export(ctx context.Context, rec Record, req proto.Message) (bool, error) {
	b, err := protojson.Marshal(req)
	if err != nil {
		return false, err
	}
	rec.Event, rec.Request, rec.Fault = EventExport, b, string(r.opts.Fault)
	if err := r.record(rec); err != nil {
		return false, err
	}
	if r.opts.Fault == Hang {
		select {
		case <-ctx.Done():
		case <-r.closing:
		}
		return false, nil
	}
	if r.opts.Delay > 0 {
		t := time.NewTimer(r.opts.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return false, nil
		case <-r.closing:
			return false, nil
		}
	}
	return true, nil
}

// httpHandler serves /v1/traces and /v1/metrics.
func (r *Receiver) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		r.serveHTTP(w, req, Traces, &coltracepb.ExportTraceServiceRequest{}, &coltracepb.ExportTraceServiceResponse{})
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, req *http.Request) {
		r.serveHTTP(w, req, Metrics, &colmetricspb.ExportMetricsServiceRequest{}, &colmetricspb.ExportMetricsServiceResponse{})
	})
	return mux
}

// serveHTTP decodes one export (protobuf or JSON, gzip-encoded or not), records it and answers
// as the fault says.
func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request, signal string, in, out proto.Message) {
	body, err := readBody(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	asJSON := strings.HasPrefix(req.Header.Get("Content-Type"), "application/json")
	if asJSON {
		err = protojson.Unmarshal(body, in)
	} else {
		err = proto.Unmarshal(body, in)
	}
	if err != nil {
		http.Error(w, "decode: "+err.Error(), http.StatusBadRequest)
		return
	}
	rec := Record{Listener: "http", Signal: signal, Encoding: req.Header.Get("Content-Encoding"), Headers: lower(req.Header)}
	answer, err := r.export(req.Context(), rec, in)
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case !answer:
	case r.opts.Fault == Unavailable:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	case r.opts.Fault == Garbage:
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(garbage())
	case asJSON:
		b, _ := protojson.Marshal(out)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	default:
		b, _ := proto.Marshal(out)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(b)
	}
}

// readBody reads a request's body, gunzipping it if it says it is gzip-encoded.
func readBody(req *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	switch enc := req.Header.Get("Content-Encoding"); enc {
	case "", "identity":
		return body, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		return io.ReadAll(io.LimitReader(zr, 256<<20))
	default:
		return nil, fmt.Errorf("unsupported Content-Encoding %q", enc)
	}
}

// lower returns h with lower-case names, as gRPC metadata has them.
func lower(h map[string][]string) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = v
	}
	return out
}

// garbage is bytes that are no protobuf answer, nor HTTP/2 frames.
func garbage() []byte {
	b := make([]byte, 1024)
	rand.Read(b)
	return append([]byte("\xff\xff\xff garbage "), b...)
}

// serveGarbage answers every connection of ln with garbage, then closes it.
func (r *Receiver) serveGarbage(ln net.Listener) {
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		conns.Go(func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 4096)
			c.Read(buf) // the client's preface, or part of it
			c.Write(garbage())
		})
	}
}

// traceService and metricsService are the gRPC services.
type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	return &coltracepb.ExportTraceServiceResponse{}, s.r.grpcExport(ctx, Traces, req)
}

type metricsService struct {
	colmetricspb.UnimplementedMetricsServiceServer
	r *Receiver
}

func (s metricsService) Export(ctx context.Context, req *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	return &colmetricspb.ExportMetricsServiceResponse{}, s.r.grpcExport(ctx, Metrics, req)
}

// grpcExport records a gRPC export and returns the error the fault says to answer.
func (r *Receiver) grpcExport(ctx context.Context, signal string, req proto.Message) error {
	md, _ := metadata.FromIncomingContext(ctx)
	answer, err := r.export(ctx, Record{Listener: "grpc", Signal: signal, Headers: md}, req)
	switch {
	case err != nil:
		return status.Error(codes.Internal, err.Error())
	case !answer && ctx.Err() != nil: // the caller's deadline passed, or it left: say which, as gRPC's own server does
		return status.FromContextError(ctx.Err()).Err()
	case !answer:
		return status.Error(codes.Unavailable, "receiver closing or the client gone")
	case r.opts.Fault == Unavailable:
		return status.Error(codes.Unavailable, "unavailable")
	}
	return nil
}

// countingListener calls accepted at every connection it accepts.
type countingListener struct {
	net.Listener
	accepted func()
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted()
	}
	return c, err
}

var errNoAddrs = errors.New("the receiver's first line gave no addresses")
