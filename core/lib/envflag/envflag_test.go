package envflag

import (
	"io"
	"os"
	"strings"
	"testing"
)

// TestSecretNotShown: the usage text that -h or a mistyped flag prints
// shows a setting's value from the environment, but never a secret's.
func TestSecretNotShown(t *testing.T) {
	env := map[string]string{"SLIP_T_TOKEN": "tok-do-not-print-0123456789", "SLIP_T_NAME": "name-from-env"}
	for _, args := range [][]string{{"-h"}, {"-no-such-flag"}} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr := os.Stderr
		os.Stderr = w
		var tok, name string
		err = Load("prog", []Var{Secret("SLIP_T_TOKEN", "token", "a secret", &tok), Def("SLIP_T_NAME", "name", "", "a name", &name)},
			&Common{}, args, func(k string) string { return env[k] })
		w.Close()
		os.Stderr = stderr
		out, _ := io.ReadAll(r)
		if err == nil || !strings.Contains(string(out), "name-from-env") || !strings.Contains(string(out), "-token") {
			t.Fatalf("%v: no usage text with the settings (err %v):\n%s", args, err, out)
		}
		if strings.Contains(string(out), env["SLIP_T_TOKEN"]) {
			t.Errorf("%v: the usage text shows the secret:\n%s", args, out)
		}
	}
	var tok string
	if err := Load("prog", []Var{Secret("SLIP_T_TOKEN", "token", "a secret", &tok)}, &Common{}, nil, func(k string) string { return env[k] }); err != nil || tok != env["SLIP_T_TOKEN"] {
		t.Errorf("the secret from the environment: %q, %v", tok, err)
	}
}
