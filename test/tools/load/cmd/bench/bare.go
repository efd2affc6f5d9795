package main

import (
	"bufio"
	"encoding/gob"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dirgate/dirgate/test/tools/load"
)

// bareCommand makes this program the bare server (its first argument, then the file
// of captured bodies): in a process of its own, its CPU time is read from /proc
// apart from the load generator's, as dirgate's is.
const bareCommand = "serve-bare"

// bareProc is the bare server running as a subprocess.
type bareProc struct {
	url   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startBare writes bodies to the work directory and starts this program again as
// the bare server on them.
func startBare(work string, bodies map[string]load.Captured) (*bareProc, error) {
	path := filepath.Join(work, "bare.gob")
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := gob.NewEncoder(f).Encode(bodies); err != nil {
		f.Close()
		return nil, fmt.Errorf("bare bodies: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &bareProc{cmd: exec.Command(self, bareCommand, path)}
	p.cmd.Stderr = os.Stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start bare server: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		p.stop()
		return nil, fmt.Errorf("bare server did not say where it serves (%q): %v", line, err)
	}
	p.url = strings.TrimSpace(line)
	return p, nil
}

// stop closes the server's stdin, which ends it, and waits.
func (p *bareProc) stop() {
	p.stdin.Close()
	p.cmd.Wait()
}

// serveBare is the subprocess: it serves the bodies in path, prints its URL, and
// ends when its standard input closes (the parent stopped it, or died).
func serveBare(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	var bodies map[string]load.Captured
	err = gob.NewDecoder(f).Decode(&bodies)
	f.Close()
	if err != nil {
		return fmt.Errorf("bare bodies: %w", err)
	}
	bare, err := load.StartBare(bodies)
	if err != nil {
		return err
	}
	fmt.Println(bare.URL)
	io.Copy(io.Discard, os.Stdin)
	return bare.Close()
}
