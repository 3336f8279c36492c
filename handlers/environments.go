package handlers

import (
	"net/http"
	"slices"
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

// notAnEnvironment is what Scope says of a route's name that no environment could have.
const notAnEnvironment = "(not an environment name)"

func (s *server) names() string { return strings.Join(segments.Names(s.envs), ", ") }

// Scope returns what a token check asks of a request to the environments served (names): the
// environment it is about, its route's or the one served, or "" for every one (an unscoped
// route while several are served). A name no environment could have is not repeated in a 403.
func Scope(names ...string) func(*http.Request) string {
	return func(r *http.Request) string {
		if name := chi.URLParam(r, envParam); name != "" {
			if !slices.Contains(names, name) && segments.ValidateName(name) != nil {
				return notAnEnvironment
			}
			return name
		}
		if len(names) == 1 {
			return names[0]
		}
		return ""
	}
}
