package handlers

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
)

// A panic after the answer has begun cuts the connection: the client sees a broken answer,
// never a 200 whose body ends with an error object. Before it has begun, a 500.
func TestPanicMidAnswerAbortsTheConnection(t *testing.T) {
	s := &server{Config: Config{Log: slog.New(slog.DiscardHandler), Observe: func(string, string, int, time.Duration) {}}}
	for _, tt := range []struct {
		name     string
		begun    bool
		wantCode int
	}{{"before the answer", false, 500}, {"mid-answer", true, 200}} {
		t.Run(tt.name, func(t *testing.T) {
			mux := chi.NewRouter()
			mux.Use(s.observed, s.recoverer)
			mux.Get("/", func(w http.ResponseWriter, r *http.Request) {
				if tt.begun {
					w.Write([]byte(`{"results":[`))
					http.NewResponseController(w).Flush()
				}
				panic("bug")
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			res, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			switch {
			case res.StatusCode != tt.wantCode:
				t.Errorf("status %d, want %d", res.StatusCode, tt.wantCode)
			case tt.begun && (err == nil || strings.Contains(string(body), `"error"`)):
				t.Errorf("mid-answer: body %q, err %v; want the connection cut", body, err)
			case !tt.begun && (err != nil || !strings.Contains(string(body), "internal error")):
				t.Errorf("before the answer: body %q, err %v", body, err)
			}
		})
	}
}
