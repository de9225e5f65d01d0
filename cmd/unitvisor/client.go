package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/unitvisor/unitvisor/config"
	"github.com/unitvisor/unitvisor/supervisor"
)

// client speaks the agent's JSON API over its unix socket.
type client struct {
	socket string
	http   *http.Client
}

func socketFlag(fs *flag.FlagSet) *string {
	def := os.Getenv("UNITVISOR_SOCKET")
	if def == "" {
		def = config.DefaultSocket
	}
	return fs.String("socket", def, "agent API socket")
}

func newClient(socket string) *client {
	return &client{socket: socket, http: &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}},
	}}
}

// apiError is an error answer of the agent.
type apiError struct {
	status int
	supervisor.APIError
}

func (e *apiError) Error() string {
	if len(e.Problems) > 0 {
		return e.APIError.Error + ":\n" + strings.Join(e.Problems, "\n")
	}
	return e.APIError.Error
}

func (c *client) do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://unitvisor"+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("reach the agent at %s: %w (is `unitvisor agent` running? set -socket or UNITVISOR_SOCKET)", c.socket, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		ae := &apiError{status: resp.StatusCode}
		if err := json.NewDecoder(resp.Body).Decode(&ae.APIError); err != nil {
			ae.APIError.Error = resp.Status
		}
		return ae
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// exitCode maps an error to the CLI's exit code: 2 for what the user must
// fix in their input, 1 for everything else.
func exitCode(err error) int {
	var ae *apiError
	if errors.As(err, &ae) && (ae.status == http.StatusBadRequest || ae.status == http.StatusNotFound) {
		return exitInvalid
	}
	return exitFailure
}
