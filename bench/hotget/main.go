// Command hotget sends an exact number of GET /memberships/user-N requests (N cycling over
// -keys), over -c keep-alive connections, and fails on any answer but 200: the fixed load of
// bench/instr, which counts a server's instructions per request and so needs to know exactly
// how many requests it answered (wrk runs for a time, not a count).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"

	"golang.org/x/sync/errgroup"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "server address")
	n := flag.Int("n", 10000, "requests to send, in all")
	conns := flag.Int("c", 8, "connections")
	keys := flag.Int("keys", 1000, "distinct context keys (user-0 ...)")
	prefix := flag.String("prefix", "", "path before /memberships/, such as /environments/default")
	flag.Parse()
	var g errgroup.Group
	for c := range *conns {
		g.Go(func() error { return send(*addr, *prefix, c, *conns, *n, *keys) })
	}
	if err := g.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, "hotget:", err)
		os.Exit(1)
	}
}

// send sends requests c, c+conns, c+2*conns ... below n, one after another on one connection.
func send(addr, prefix string, c, conns, n, keys int) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i := c; i < n; i += conns {
		if _, err := fmt.Fprintf(conn, "GET %s/memberships/user-%d HTTP/1.1\r\nHost: bench\r\n\r\n", prefix, i%keys); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("request %d: %s", i, resp.Status)
		}
	}
	return nil
}
