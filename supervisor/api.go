package supervisor

import (
	"encoding/json"
	"errors"
	"net/http"
)

// SubmitRequest is the body of POST /v1/jobs.
type SubmitRequest struct {
	File   string `json:"file"`
	Source string `json:"source"`
}

// APIError is the body of every non-2xx answer.
type APIError struct {
	Error    string   `json:"error"`
	Problems []string `json:"problems,omitempty"`
}

// Handler serves the agent's JSON API:
//
//	POST   /v1/jobs          submit a job file ({"file","source"})
//	GET    /v1/jobs          status of all jobs
//	GET    /v1/jobs/{name}   status of one job
//	DELETE /v1/jobs/{name}   stop it (?purge=true also forgets it)
//	GET    /v1/agent         information about this agent
func (s *Supervisor) Handler(info func() any) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		var req SubmitRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, APIError{Error: "bad request body: " + err.Error()})
			return
		}
		res, err := s.Submit(r.Context(), req.File, []byte(req.Source))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		all, err := s.List()
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, all)
	})
	mux.HandleFunc("GET /v1/jobs/{name}", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.Status(r.PathValue("name"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("DELETE /v1/jobs/{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := s.StopJob(r.Context(), r.PathValue("name"), r.URL.Query().Get("purge") == "true"); err != nil {
			writeErr(w, err)
			return
		}
		st, err := s.Status(r.PathValue("name"))
		if errors.Is(err, ErrNotFound) {
			writeJSON(w, http.StatusOK, JobStatus{Name: r.PathValue("name"), Stopped: true})
			return
		}
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("GET /v1/agent", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, info())
	})
	return mux
}

func writeErr(w http.ResponseWriter, err error) {
	var inv *InvalidError
	switch {
	case errors.As(err, &inv):
		writeJSON(w, http.StatusBadRequest, APIError{Error: "invalid job", Problems: inv.Problems})
	case errors.Is(err, ErrNotFound):
		writeJSON(w, http.StatusNotFound, APIError{Error: err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, APIError{Error: err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
