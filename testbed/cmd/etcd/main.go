// Command etcd is etcd's server, as go.etcd.io/etcd/server/v3's own main package builds it; a
// command of this module so that the binary is named etcd (that package's path ends in /v3).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
