// Command podload creates the benchmark's measured pods the way scheduler_perf creates them, so
// that what a benchmark measures is the scheduler, not the cost of a Python client.
//
// scheduler_perf's createPods op (test/integration/scheduler_perf in k8s.io/kubernetes:
// executor.go createPodsRapidly -> runners.go CreatePod) creates its pods from inside the Go
// test process with client-go: workqueue.ParallelizeUntil with 30 workers (fewer for fewer than
// 30 pods), each pod by test/utils' CreatePodWithRetries (an AlreadyExists counts as created),
// through a client whose QPS and burst are 5000 (util.go mustSetupCluster). podload does the same
// with the pods it is given: one JSON object per line on standard input (core/v1 Pods; the
// namespace of each from its metadata, else --namespace). client-go 1.37 sends them as protobuf.
//
// On standard output, one JSON line per pod once all are done: {"pod": NAME, "sent": S, "done": D},
// S and D in seconds of CLOCK_MONOTONIC (Python's time.monotonic() on Linux), taken just before the
// request and when its answer arrived, so that the caller can measure creation-to-binding
// latencies against its own clock. An error names the pod on standard error; the exit status is
// then 1 (the other pods are still created and reported).
//
//	podload --kubeconfig FILE [--workers 30] [--qps 5000] [--burst 5000] < pods.jsonl
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

type record struct {
	Pod  string  `json:"pod"`
	Sent float64 `json:"sent"`
	Done float64 `json:"done"`
}

func monotonic() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // (Linux always has it)
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

func readPods(namespace string) ([]*v1.Pod, error) {
	var pods []*v1.Pod
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; scanner.Scan(); line++ {
		if len(scanner.Bytes()) == 0 {
			continue
		}
		pod := &v1.Pod{}
		if err := json.Unmarshal(scanner.Bytes(), pod); err != nil {
			return nil, fmt.Errorf("standard input line %d: %v", line, err)
		}
		if pod.Namespace == "" {
			pod.Namespace = namespace
		}
		pods = append(pods, pod)
	}
	return pods, scanner.Err()
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the API server's kubeconfig")
	namespace := flag.String("namespace", "default", "the namespace of pods that name none")
	workers := flag.Int("workers", 30, "parallel creations (scheduler_perf's CreatePod: 30)")
	qps := flag.Float64("qps", 5000, "client QPS (scheduler_perf: 5000)")
	burst := flag.Int("burst", 5000, "client burst (scheduler_perf: 5000)")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "podload: %v\n", err)
		os.Exit(2)
	}
	config.QPS, config.Burst = float32(*qps), *burst
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "podload: %v\n", err)
		os.Exit(2)
	}
	pods, err := readPods(*namespace)
	if err != nil {
		fmt.Fprintf(os.Stderr, "podload: %v\n", err)
		os.Exit(2)
	}

	records := make([]record, len(pods))
	var mu sync.Mutex
	failed := 0
	create := func(i int) {
		pod := pods[i]
		sent := monotonic()
		_, err := client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
		records[i] = record{Pod: pod.Name, Sent: sent, Done: monotonic()}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			mu.Lock()
			failed++
			mu.Unlock()
			fmt.Fprintf(os.Stderr, "podload: pod %s/%s: %v\n", pod.Namespace, pod.Name, err)
			records[i].Done = -1
		}
	}
	workqueue.ParallelizeUntil(context.Background(), min(*workers, max(1, len(pods))), len(pods), create)

	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for _, r := range records {
		if r.Done >= 0 {
			_ = encoder.Encode(r)
		}
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "podload: %v\n", err)
		os.Exit(2)
	}
	if failed > 0 {
		os.Exit(1)
	}
}
