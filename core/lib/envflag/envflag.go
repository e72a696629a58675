// Package envflag loads a tier's configuration from flags whose defaults come
// from SLIP_* environment variables, and reads the example env files in
// deploy/env so tests can hold them to the code. Every tier uses it, so each
// setting is a flag and a variable in the same way everywhere.
package envflag

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Var is one setting: its environment variable, flag, default and meaning,
// bound to a *string, *int, *bool, *float64 or *time.Duration. A Var with
// no Env is a flag only (an option of one command, such as a report's
// format).
type Var struct {
	Env, Flag, Default, Usage string
	Dst                       any
	Secret                    bool // its value is never shown, not even in the usage text
}

// Common holds the flags every program has.
type Common struct {
	CheckOnly   bool // -validate: check the configuration and exit
	ShowVersion bool // -version: print the version and exit
}

// Load parses args into vars, each defaulting to its environment variable
// (read with getenv) and then to its built-in default, plus -validate and
// -version into c. A variable set to "" counts as unset.
func Load(program string, vars []Var, c *Common, args []string, getenv func(string) string) error {
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	for _, v := range vars {
		def, usage := v.Default, v.Usage
		if v.Env != "" {
			if e := getenv(v.Env); e != "" {
				def = e
			}
			usage += " (" + v.Env + ")"
		}
		switch dst := v.Dst.(type) {
		case *string:
			fs.StringVar(dst, v.Flag, def, usage)
			if v.Secret {
				fs.Lookup(v.Flag).DefValue = "" // what -h and a bad flag print
			}
		case *int:
			n, err := strconv.Atoi(def)
			if err != nil {
				return fmt.Errorf("%s: %q is not an integer", v.Env, def)
			}
			fs.IntVar(dst, v.Flag, n, usage)
		case *bool:
			b, err := strconv.ParseBool(def)
			if err != nil {
				return fmt.Errorf("%s: %q is not true or false", v.Env, def)
			}
			fs.BoolVar(dst, v.Flag, b, usage)
		case *float64:
			n, err := strconv.ParseFloat(def, 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not a number", v.Env, def)
			}
			fs.Float64Var(dst, v.Flag, n, usage)
		case *time.Duration:
			d, err := time.ParseDuration(def)
			if err != nil {
				return fmt.Errorf("%s: %w", v.Env, err)
			}
			fs.DurationVar(dst, v.Flag, d, usage)
		default:
			panic(fmt.Sprintf("envflag: %s bound to unsupported %T", v.Env, v.Dst))
		}
	}
	fs.BoolVar(&c.CheckOnly, "validate", false, "check the configuration and exit")
	fs.BoolVar(&c.ShowVersion, "version", false, "print the version and exit")
	return fs.Parse(args)
}

// ReadEnvFile reads NAME=value lines, skipping blank lines and # comments.
func ReadEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		out[k] = v
	}
	return out, sc.Err()
}

// Drift compares an example env file with the program's vars and returns
// every difference: a variable missing from the file, a default that
// differs, a variable the program does not read.
func Drift(file map[string]string, vars []Var) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range vars {
		seen[v.Env] = true
		got, ok := file[v.Env]
		switch {
		case !ok:
			out = append(out, v.Env+" is missing from the example")
		case got != v.Default:
			out = append(out, fmt.Sprintf("%s: example says %q, code defaults to %q", v.Env, got, v.Default))
		}
	}
	for k := range file {
		if !seen[k] {
			out = append(out, k+" is in the example but not read by the program")
		}
	}
	return out
}

// Def returns the setting env (flag name flagName) with default def, bound
// to dst.
func Def(env, flagName, def, usage string, dst any) Var {
	return Var{Env: env, Flag: flagName, Default: def, Usage: usage, Dst: dst}
}

// Secret is a string setting whose value the usage text does not show (a
// token, a key, a password); it has no default.
func Secret(env, flagName, usage string, dst *string) Var {
	return Var{Env: env, Flag: flagName, Usage: usage, Dst: dst, Secret: true}
}

// Main runs a tier's program: run gets a context cancelled by SIGINT or
// SIGTERM, the arguments and the environment; an error is printed and the
// process exits 1.
func Main(program string, run func(ctx context.Context, args []string, getenv func(string) string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, program+":", err)
		stop()
		os.Exit(1)
	}
}

// Done handles -version and -validate: it prints the version, or checks the
// configuration with validate (and reports every problem). done is true
// when the program should stop here, with err as its result.
func (c Common) Done(program, version string, validate func() error) (done bool, err error) {
	if c.ShowVersion {
		fmt.Println(program, version)
		return true, nil
	}
	if err := validate(); err != nil {
		return true, err
	}
	if c.CheckOnly {
		fmt.Println(program + ": configuration is valid")
	}
	return c.CheckOnly, nil
}

// Schedule reads a comma-separated list of durations such as
// "30s,60s,120s,240s".
func Schedule(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if d <= 0 {
			return nil, fmt.Errorf("%s: must be positive", f)
		}
		out = append(out, d)
	}
	return out, nil
}

// FileDrift reads the example env file at path and returns its Drift from
// vars.
func FileDrift(path string, vars []Var) ([]string, error) {
	file, err := ReadEnvFile(path)
	if err != nil {
		return nil, err
	}
	return Drift(file, vars), nil
}
