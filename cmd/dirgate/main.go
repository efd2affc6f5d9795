// Command dirgate serves the group-membership API in front of a directory. It is
// the only package that wires dirgate's adapters together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time (make build).
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dirgate:", err)
		os.Exit(1)
	}
}

// run is main without the process: tests call it with their own arguments.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "version" {
		fmt.Fprintf(stdout, "dirgate %s\n", version)
		return nil
	}
	if len(args) > 0 && args[0] == "policy" {
		return runPolicy(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	cfg, err := LoadConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	m := NewMain(cfg, stdout, stderr)
	if err := m.Run(ctx); err != nil {
		m.Close()
		return err
	}
	<-ctx.Done()
	return m.Close()
}
