package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// serverEnv are the variables of the server's own environment every step
// gets (when the server has them set), SPEC §11.1.
var serverEnv = []string{"PATH", "HOME", "LANG", "TZ"}

// StepEnv is the environment of a step's command (SPEC §11.1). It is built
// from nothing, in this order, a later value replacing an earlier one:
//
//  1. PATH, HOME, LANG and TZ of the server, when set;
//  2. the contract variables of SPEC §6: MANENT_DEPLOY_ID,
//     MANENT_APPLICATION, MANENT_ENVIRONMENT, MANENT_VERSION, MANENT_STEP,
//     MANENT_ARTIFACT and MANENT_WORKDIR, then extra (NAME=value: what a
//     plugin protocol adds, such as MANENT_ACTION);
//  3. the server's variables named in pass (plugins.pass_env) that are set;
//  4. the step's with.env.
//
// Nothing else of the server's environment — tokens, MANENT_BOOTSTRAP_TOKEN,
// callback and ITSM secrets, database DSNs — reaches the command.
func StepEnv(pc Context, pass []string, extra ...string) []string {
	var e envList
	for _, k := range serverEnv {
		if v, ok := os.LookupEnv(k); ok {
			e.set(k, v)
		}
	}
	e.set("MANENT_DEPLOY_ID", pc.DeployID)
	e.set("MANENT_APPLICATION", pc.Application)
	e.set("MANENT_ENVIRONMENT", pc.Environment)
	e.set("MANENT_VERSION", pc.Version)
	e.set("MANENT_STEP", pc.Step)
	e.set("MANENT_ARTIFACT", pc.Artifact)
	e.set("MANENT_WORKDIR", pc.WorkDir)
	for _, kv := range extra {
		if k, v, ok := strings.Cut(kv, "="); ok {
			e.set(k, v)
		}
	}
	for _, k := range pass {
		if v, ok := os.LookupEnv(k); ok {
			e.set(k, v)
		}
	}
	with, _ := WithEnv(pc.With)
	keys := make([]string, 0, len(with))
	for k := range with {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e.set(k, with[k])
	}
	return e.list()
}

// WithEnv reads `with.env`: a mapping of variable names to scalar values
// (nil when absent). A name that is empty or holds `=` or NUL, or a value
// that holds NUL or is not a scalar, is an error.
func WithEnv(with map[string]any) (map[string]string, error) {
	raw, ok := with["env"]
	if !ok || raw == nil {
		return nil, nil
	}
	var m map[string]any
	switch v := raw.(type) {
	case map[string]any:
		m = v
	case map[string]string:
		m = make(map[string]any, len(v))
		for k, s := range v {
			m[k] = s
		}
	default:
		return nil, Settingf("env", "with.env must be a mapping of variable names to values")
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if err := CheckEnvName(k); err != nil {
			return nil, &SettingError{Path: SettingPath("env", k), Err: fmt.Errorf("with.env: %w", err)}
		}
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case bool, int, int64, uint64:
			s = fmt.Sprint(v)
		case float64:
			// As written: 12345678, not 1.2345678e+07 (numbers arrive as
			// float64 once the deploy went through JSON).
			s = strconv.FormatFloat(v, 'f', -1, 64)
		case json.Number:
			s = v.String()
		case nil:
		default:
			return nil, Settingf(SettingPath("env", k), "with.env.%s must be a string, a number or a boolean", k)
		}
		if strings.ContainsRune(s, 0) {
			return nil, Settingf(SettingPath("env", k), "with.env.%s holds a NUL character", k)
		}
		out[k] = s
	}
	return out, nil
}

// CheckEnvName refuses a variable name a process environment cannot hold.
func CheckEnvName(name string) error {
	if name == "" || strings.ContainsAny(name, "=\x00") {
		return fmt.Errorf("%q is not a valid environment variable name", name)
	}
	return nil
}

// envList is an ordered environment in which setting a name again replaces
// its value in place.
type envList struct {
	keys []string
	vals map[string]string
}

func (e *envList) set(k, v string) {
	if e.vals == nil {
		e.vals = map[string]string{}
	}
	if _, ok := e.vals[k]; !ok {
		e.keys = append(e.keys, k)
	}
	e.vals[k] = v
}

func (e *envList) list() []string {
	out := make([]string, len(e.keys))
	for i, k := range e.keys {
		out[i] = k + "=" + e.vals[k]
	}
	return out
}

// startupPrefixes and startupNames are the variables that change how a
// program starts rather than what it is told: the dynamic loader's (LD_*, DYLD_*), where
// programs and start-up files are found (PATH, HOME, XDG_CONFIG_HOME),
// what a shell runs before its script (BASH_ENV, ENV, BASH_FUNC_*%%
// exported functions, SHELLOPTS, BASHOPTS, PS4, IFS), glibc's conversion
// modules (GCONV_PATH), and the code language runtimes load besides the
// program (PYTHONPATH, NODE_OPTIONS, PERL5OPT, JAVA_TOOL_OPTIONS, …).
var (
	startupPrefixes = []string{"LD_", "DYLD_", "BASH_FUNC_"}
	startupNames    = map[string]bool{
		"PATH": true, "HOME": true, "XDG_CONFIG_HOME": true,
		"BASH_ENV": true, "ENV": true, "SHELLOPTS": true, "BASHOPTS": true, "PS4": true, "IFS": true,
		"GCONV_PATH": true,
		"PYTHONPATH": true, "PYTHONHOME": true, "PYTHONSTARTUP": true, "PYTHONWARNINGS": true,
		"PERL5OPT": true, "PERL5LIB": true, "PERLLIB": true, "PERL5DB": true,
		"RUBYOPT": true, "RUBYLIB": true,
		"NODE_OPTIONS": true, "NODE_PATH": true,
		"JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true, "JDK_JAVA_OPTIONS": true, "CLASSPATH": true,
	}
)

// CheckProgramEnv refuses the with.env entries that would run other code
// than the program an operator installed, or tell it another deploy: a
// variable of startupPrefixes or startupNames (LD_PRELOAD of a library an
// artifact shipped, a PATH leading to its programs, an exported bash
// function) and the
// MANENT_* variables of the protocol, which the program reads as the
// deploy's own. An external plugin is the operators' program, which
// plugins.steps allows custom steps and targets to run — not any
// program: with those variables the descriptor would choose what runs,
// as the server's user, where plugins.steps does not list script. (A
// script's command is the descriptor's own: it is not checked.) One
// SettingError per name, at env/<NAME>; nil when there is none.
func CheckProgramEnv(with map[string]any) error {
	env, err := WithEnv(with)
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(env)) {
		startup := startupNames[k]
		for _, p := range startupPrefixes {
			startup = startup || strings.HasPrefix(k, p)
		}
		switch {
		case startup:
			errs = append(errs, Settingf(SettingPath("env", k), "with.env.%s would change how the plugin's executable starts (what the loader, a shell or a language runtime loads and runs besides it): a deploy may not choose what the operators' plugin runs; a variable the plugin needs from the server goes in plugins.pass_env", k))
		case strings.HasPrefix(k, "MANENT_"):
			errs = append(errs, Settingf(SettingPath("env", k), "with.env.%s is a variable of the plugin protocol: the plugin is given the deploy's own value, which a deploy may not replace", k))
		}
	}
	return errors.Join(errs...)
}
