package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestTrainFlagErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error message
	}{
		{"bad budget", []string{"-budget", "lots"}, `-budget: "lots" is not a byte size`},
		{"bad budget percent", []string{"-budget", "0%"}, "positive percentage of the in-core peak"},
		{"unknown model", []string{"-model", "resnet9000"}, `-model "resnet9000": unknown model (known: `},
		{"unknown optimizer", []string{"-optimizer", "rmsprop"}, `-optimizer "rmsprop": unknown optimizer (want sgd, momentum, adam)`},
		{"unknown allocator", []string{"-allocator", "slab"}, `unknown allocator "slab" (want va or bestfit)`},
		{"unknown scheduler", []string{"-scheduler", "lms"}, `-scheduler "lms": unknown scheduler (want auto, window or baseline)`},
		{"bad window", []string{"-window", "wide"}, `-window: "wide" is not a byte size`},
		{"zero batch", []string{"-batch", "0"}, "-batch 0: must be positive"},
		{"zero epochs", []string{"-epochs", "0"}, "-epochs 0: must be positive"},
		{"negative steps", []string{"-steps", "-1"}, "-steps -1: must not be negative"},
		{"negative lr", []string{"-lr", "-0.1"}, "-lr -0.1: must be a positive number"},
		{"resume without checkpoint", []string{"-resume"}, "-resume needs -checkpoint FILE"},
		{"save-every without checkpoint", []string{"-save-every", "5"}, "-save-every needs -checkpoint FILE"},
		{"checkpoint dir missing", []string{"-checkpoint", dir + "/no/such/dir/c.ckpt"}, "directory " + dir + "/no/such/dir does not exist"},
		{"bad progress", []string{"-progress", "fancy"}, `-progress "fancy": want auto, bar or plain`},
		{"positional", []string{"smallcnn"}, `unexpected arguments ["smallcnn"]`},
		{"unknown flag", []string{"-turbo"}, "flag provided but not defined: -turbo"},
		{"not a number", []string{"-batch", "many"}, `invalid value "many" for flag -batch`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTrainFlags(tc.args, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !errors.Is(err, errUsage) {
				t.Errorf("error %v is not a usage error (exit status 2)", err)
			}
		})
	}
}

func TestTrainFlagDefaults(t *testing.T) {
	o, err := parseTrainFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Model != "smallcnn" || o.Data != "synthetic" || o.Optimizer != "adam" || o.LR != 0.001 ||
		o.Budget.Percent != 60 || o.Scheduler != "auto" || o.Allocator.String() != "va" || o.Epochs != 1 || o.Batch != 32 {
		t.Errorf("defaults: %+v", o)
	}
	for opt, lr := range map[string]float64{"sgd": 0.01, "momentum": 0.01, "adam": 0.001} {
		o, err := parseTrainFlags([]string{"-optimizer", opt}, &bytes.Buffer{})
		if err != nil || o.LR != lr {
			t.Errorf("-optimizer %s: lr %v, %v; want %v", opt, o.LR, err, lr)
		}
	}
	o, err = parseTrainFlags([]string{"-allocator", "bestfit", "-budget", "64MiB", "-window", "96MiB"}, &bytes.Buffer{})
	if err != nil || o.Allocator.String() != "bestfit" || o.Budget.Bytes != 64<<20 || o.Window != 96<<20 {
		t.Errorf("-allocator bestfit -budget 64MiB -window 96MiB: %+v, %v", o, err)
	}
}

// Errors found only when the run starts: data that is not there, a model that
// does not fit the data, a budget too small for the step.
func TestTrainSetupErrors(t *testing.T) {
	missing := t.TempDir() + "/nowhere"
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing cifar dir", []string{"-data", "cifar10:" + missing}, []string{"-data cifar10:" + missing, missing}},
		{"missing folder dir", []string{"-data", "folder:" + missing}, []string{"-data folder:" + missing, missing}},
		{"missing mnist dir", []string{"-data", "mnist:" + missing}, []string{"-data mnist:" + missing, missing}},
		{"missing fashion-mnist dir", []string{"-data", "fashion-mnist:" + missing}, []string{missing, "apt-get install -y dataset-fashion-mnist"}},
		{"dir needed", []string{"-data", "cifar10"}, []string{"needs a directory"}},
		{"unknown data", []string{"-data", "imagenet:/x"}, []string{`unknown dataset spec "imagenet:/x"`}},
		{"classes disagree", []string{"-data", "synthetic:n=16,classes=3", "-classes", "5"}, []string{"-classes 5: -data synthetic:n=16,classes=3 has 3 classes"}},
		{"image not divisible", []string{"-data", "synthetic:n=16", "-image", "18"}, []string{"smallcnn", "18x18"}},
		{"budget too small", tiny("-budget", "64KiB"), []string{"-budget 64.0 KiB (65536 bytes", "infeasible"}},
		{"too few examples", []string{"-data", "synthetic:n=3", "-batch", "4", "-image", "16"}, []string{"no full batch of 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args[0] != "-model" {
				args = append([]string{"-batch", "4", "-image", "16", "-progress", "plain"}, args...)
			}
			_, out, err := trainArgs(t, args...)
			if err == nil {
				t.Fatalf("no error; output:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestRunExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{nil, 2, "usage: ooc <command>"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"help"}, 0, "commands:"},
		{[]string{"train", "-h"}, 0, "-budget"},
		{[]string{"eval", "-h"}, 0, "-checkpoint"},
		{[]string{"train", "-optimizer", "rmsprop"}, 2, "ooc train: -optimizer"},
		{[]string{"eval"}, 2, "ooc eval: -checkpoint FILE is required"},
		{[]string{"eval", "-checkpoint", "/nonexistent/c.ckpt"}, 1, "/nonexistent/c.ckpt"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.out) {
			t.Errorf("run %q: exit %d, output %q; want %d and %q", tc.args, code, stdout.String()+stderr.String(), tc.code, tc.out)
		}
	}
}
