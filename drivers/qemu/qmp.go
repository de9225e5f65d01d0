package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"time"
)

// Powerdown asks a VM to shut down over its QMP socket: it negotiates
// capabilities, sends system_powerdown, writes the exchange to log, then
// waits until qemu closes the socket (it has exited) or timeout passes. A
// guest that ignores the request is then the caller's (systemd's) to kill.
func Powerdown(ctx context.Context, socket string, timeout time.Duration, log io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return fmt.Errorf("qmp: connect %s: %w", socket, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	recv := func() (map[string]json.RawMessage, error) {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "qmp< %s", line)
		var m map[string]json.RawMessage
		return m, json.Unmarshal(line, &m)
	}
	// call sends a command and reads until its answer, skipping events.
	call := func(cmd string) error {
		msg := fmt.Sprintf(`{"execute":%q}`, cmd)
		fmt.Fprintf(log, "qmp> %s\n", msg)
		if _, err := io.WriteString(conn, msg+"\n"); err != nil {
			return err
		}
		for {
			m, err := recv()
			if err != nil {
				return err
			}
			if e, ok := m["error"]; ok {
				return fmt.Errorf("%s: %s", cmd, e)
			}
			if _, ok := m["return"]; ok {
				return nil
			}
		}
	}
	if _, err := recv(); err != nil { // the greeting
		return fmt.Errorf("qmp: greeting: %w", err)
	}
	if err := call("qmp_capabilities"); err != nil {
		return fmt.Errorf("qmp: %w", err)
	}
	if err := call("system_powerdown"); err != nil {
		return fmt.Errorf("qmp: %w", err)
	}
	for {
		if _, err := recv(); err != nil {
			if err == io.EOF {
				fmt.Fprintln(log, "qmp: the VM has shut down")
				return nil
			}
			fmt.Fprintf(log, "qmp: the VM did not shut down within %s\n", timeout)
			return nil
		}
	}
}
