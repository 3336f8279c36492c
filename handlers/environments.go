package handlers

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/bigseg/bigseg/segments"
)

// envParam is the route parameter of the scoped routes, /environments/{env}/.
const envParam = "env"

// environment is the environment a request is about: its route's, or the one served. Else
// it answers a 404 that names the environments, and returns false.
func (s *server) environment(w http.ResponseWriter, r *http.Request) (*segments.Environment, bool) {
	name := chi.URLParam(r, envParam)
	if name == "" {
		if len(s.envs) == 1 {
			return s.envs[0], true
		}
		Error(w, r, http.StatusNotFound, "several environments are served ("+s.names()+
			"): ask under /environments/{env}/, such as /environments/"+s.envs[0].Name+"/"+
			strings.TrimLeft(strings.TrimPrefix(r.URL.Path, "/environments/"), "/"))
		return nil, false
	}
	e, ok := s.byName[name]
	if !ok {
		what := "no environment " + name
		if segments.ValidateName(name) != nil {
			what = "no such environment"
		}
		Error(w, r, http.StatusNotFound, what+": the environments served are "+s.names())
	}
	return e, ok
}

// notAnEnvironment is what scope says of a route's name that no environment could have.
const notAnEnvironment = "(not an environment name)"

func (s *server) names() string {
	names := make([]string, len(s.envs))
	for i, e := range s.envs {
		names[i] = e.Name
	}
	return strings.Join(names, ", ")
}

// scope is the environment a request asks the token check for: its route's, the one served,
// or "" (every one). A name no environment could have is not repeated in the 403.
func (s *server) scope(r *http.Request) string {
	if name := chi.URLParam(r, envParam); name != "" {
		if _, known := s.byName[name]; !known && segments.ValidateName(name) != nil {
			return notAnEnvironment
		}
		return name
	}
	if len(s.envs) == 1 {
		return s.envs[0].Name
	}
	return ""
}

// authenticate is the token check, when there is one.
func (s *server) authenticate(next http.Handler) http.Handler {
	if s.Auth == nil {
		return next
	}
	return s.Auth.Require(Error, s.scope)(next)
}
