//go:build tools

// Package testbed names the commands the test bed builds, so that go.mod and go.sum hold
// everything they need (the usual tools.go pattern: this file is never compiled). The module's own
// commands, cmd/etcd and cmd/podload, need no entry: go.mod requires what they import.
package testbed

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
