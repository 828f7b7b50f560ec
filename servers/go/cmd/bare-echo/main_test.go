package main

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"xferbench/servers/go/gen/xferv1"
)

var readyLine = regexp.MustCompile(`^bare-echo ready grpc=(127\.0\.0\.1:\d+)$`)

// startBareEcho builds the command, starts it as a process and returns the
// gRPC address from its ready line.
func startBareEcho(t *testing.T) (addr string, proc *exec.Cmd) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bare-echo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--grpc-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case line := <-lines:
		m := readyLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("ready line %q: want %s", line, readyLine)
		}
		return m[1], cmd
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line within 30 s")
	}
	return "", nil
}

func TestBareEchoProcess(t *testing.T) {
	addr, cmd := startBareEcho(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := xferv1.NewFileTransferClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	payload := bytes.Repeat([]byte{0xA5, 0x00, 0x5A}, 100)
	resp, err := c.Echo(ctx, &xferv1.EchoRequest{Payload: payload})
	if err != nil {
		t.Fatalf("Echo: %v", err)
	}
	if !bytes.Equal(resp.Payload, payload) {
		t.Fatalf("Echo returned %d bytes, want the %d sent", len(resp.Payload), len(payload))
	}
	// Everything but Echo is grpc-go's Unimplemented: the baseline does no other work.
	if _, err := c.Stat(ctx, &xferv1.StatRequest{Name: "x"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Stat: %v, want Unimplemented", err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v, want status 0", err)
	}
}
