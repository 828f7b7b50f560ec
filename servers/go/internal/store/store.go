// Package store keeps files for both transports: staged uploads with
// chunk-slot tracking, atomic commit, idle expiry, committed files in
// memory or on disk, and generated gen: content from cached blocks.
package store

import (
	"crypto/rand"
	"encoding/binary"
	"hash/crc32"
	"sync"
	"time"

	"xferbench/servers/go/internal/content"
	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/limits"
)

// Janitor period bounds: idle uploads are noticed within a quarter of the
// timeout, checked at least this often and at most this often.
const (
	minSweep = 10 * time.Millisecond
	maxSweep = time.Second
)

// backend is where bytes live: memory or a directory.
type backend interface {
	stage(id, size, chunkSize uint64) (stager, error)
	// load finds a file committed before this process started; not_found
	// when there is none.
	load(name string) (Info, source, error)
	describe() string
	// close releases what the backend holds open (the disk store's
	// directory descriptors); no call may follow.
	close()
}

// Store is safe for concurrent use.
type Store struct {
	lim  limits.Limits
	back backend
	gen  *genCache
	now  func() time.Time

	mu      sync.Mutex
	uploads map[uint64]*upload
	owned   map[uint64]int // open uploads per owning connection (owner 0: none)
	staged  uint64         // declared sizes of the open uploads
	files   map[string]*blob

	stop chan struct{}
	done chan struct{}
}

func newStore(lim limits.Limits, back backend) *Store {
	s := &Store{
		lim:     lim,
		back:    back,
		gen:     newGenCache(time.Now),
		now:     time.Now,
		uploads: make(map[uint64]*upload),
		owned:   make(map[uint64]int),
		files:   make(map[string]*blob),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go s.janitor()
	return s
}

// String names the store as the startup line shows it.
func (s *Store) String() string { return s.back.describe() }

// Close stops the janitor and discards open uploads.
func (s *Store) Close() {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	open := make([]*upload, 0, len(s.uploads))
	for _, u := range s.uploads {
		open = append(open, u)
	}
	s.mu.Unlock()
	for _, u := range open {
		s.drop(u)
	}
	s.back.close()
}

// Begin opens an upload belonging to no connection and returns its id.
func (s *Store) Begin(name string, size uint64, chunkSize uint32) (uint64, error) {
	return s.BeginOwned(0, name, size, chunkSize)
}

// BeginOwned opens an upload owned by a connection (owner != 0): it counts
// against that connection's --max-uploads-per-conn and AbortOwner discards
// it when the connection closes.
func (s *Store) BeginOwned(owner uint64, name string, size uint64, chunkSize uint32) (uint64, error) {
	if err := validateUploadName(name); err != nil {
		return 0, err
	}
	if err := s.lim.CheckFileSize(size); err != nil {
		return 0, err
	}
	if err := s.lim.CheckChunkSize(chunkSize); err != nil {
		return 0, err
	}
	if err := s.lim.CheckUploadChunk(chunkSize, size); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkRoom(owner, size); err != nil {
		return 0, err
	}
	id, err := s.newID()
	if err != nil {
		return 0, err
	}
	st, err := s.back.stage(id, size, uint64(chunkSize))
	if e := fdExhausted(err); e != nil {
		return 0, e
	}
	if err != nil {
		return 0, errs.New(errs.Internal, "staging upload of %q: %v", name, ioErr(err))
	}
	u := &upload{id: id, owner: owner, name: name, size: size, chunkSize: uint64(chunkSize), st: st, slots: make(map[uint64]slot)}
	u.touch(s.now())
	s.uploads[id] = u
	s.owned[owner]++
	s.staged += size
	return id, nil
}

// checkRoom applies the server-wide, per-connection and staged-bytes
// limits to a new upload; s.mu is held.
func (s *Store) checkRoom(owner, size uint64) error {
	if len(s.uploads) >= s.lim.MaxUploads {
		return errs.New(errs.ResourceExhausted, "too many open uploads (limit %d)", s.lim.MaxUploads)
	}
	if owner != 0 && s.owned[owner] >= s.lim.MaxUploadsPerConn {
		return errs.New(errs.ResourceExhausted, "too many open uploads on this connection (limit %d, --max-uploads-per-conn)", s.lim.MaxUploadsPerConn)
	}
	if size > s.lim.MaxStagedBytes-min(s.staged, s.lim.MaxStagedBytes) {
		return errs.New(errs.ResourceExhausted, "staged bytes %d + size %d exceed limit %d (--max-staged-bytes)", s.staged, size, s.lim.MaxStagedBytes)
	}
	return nil
}

// unlist removes u from the open set and releases what it counted
// against the limits; s.mu is held.
func (s *Store) unlist(u *upload) {
	delete(s.uploads, u.id)
	if s.owned[u.owner]--; s.owned[u.owner] <= 0 {
		delete(s.owned, u.owner)
	}
	s.staged -= u.size
}

// AbortOwner discards every open upload owner began: called when its
// connection closes, so the slots and staged bytes come back at once.
func (s *Store) AbortOwner(owner uint64) {
	if owner == 0 { // uploads of no connection end only by commit, abort or expiry
		return
	}
	s.mu.Lock()
	var mine []*upload
	if s.owned[owner] > 0 {
		for _, u := range s.uploads {
			if u.owner == owner {
				mine = append(mine, u)
			}
		}
	}
	s.mu.Unlock()
	for _, u := range mine {
		s.drop(u)
	}
}

// newID draws an unguessable, non-zero, unused id; s.mu is held.
func (s *Store) newID() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, errs.New(errs.Internal, "drawing an upload id: %v", err)
		}
		id := binary.LittleEndian.Uint64(b[:])
		if _, used := s.uploads[id]; id != 0 && !used {
			return id, nil
		}
	}
}

func (s *Store) lookup(id uint64) (*upload, error) {
	s.mu.Lock()
	u, ok := s.uploads[id]
	s.mu.Unlock()
	if !ok {
		return nil, errs.New(errs.NotFound, "no open upload with id %d", id)
	}
	return u, nil
}

// Chunk stores one chunk, given whole or as the pieces it arrived in (a
// gRPC message spans many receive buffers: storing them in order spares a
// copy that joins them). It returns the bytes received so far. The pieces
// may alias pooled buffers: they are copied before Chunk returns.
func (s *Store) Chunk(id, off uint64, pieces ...[]byte) (uint64, error) {
	u, err := s.lookup(id)
	if err != nil {
		return 0, err
	}
	u.touch(s.now())
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	idx, err := u.reserve(off, n)
	if err != nil {
		return 0, err
	}
	var crc uint32 // only for a chunk the upload accepts: a refused one costs no pass over its bytes
	for _, p := range pieces {
		crc = crc32.Update(crc, crc32.IEEETable, p)
	}
	werr := u.st.WriteAt(pieces, off)
	return u.finish(idx, n, crc, werr)
}

// Commit checks completeness and the CRC, then makes the file visible in
// one step. Any failure aborts the upload.
func (s *Store) Commit(id uint64, clientCRC uint32) (Info, error) {
	u, err := s.lookup(id)
	if err != nil {
		return Info{}, err
	}
	if !s.detach(u) {
		return Info{}, u.notFound()
	}
	u.writers.Wait()
	if u.received != u.size {
		u.st.Discard()
		return Info{}, errs.New(errs.FailedPrecondition, "upload incomplete: received %d of %d bytes", u.received, u.size)
	}
	info := Info{Size: u.size, CRC: u.crc()}
	if info.CRC != clientCRC {
		u.st.Discard()
		return Info{}, errs.New(errs.DataLoss, "crc32 mismatch: client 0x%08x, server 0x%08x", clientCRC, info.CRC)
	}
	if err := s.publish(u, info); err != nil {
		u.st.Discard()
		return Info{}, err
	}
	return info, nil
}

// publish swaps the new version in under s.mu, so Open sees the old version
// or the new, and a later commit of the same name replaces it whole.
func (s *Store) publish(u *upload, info Info) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, err := u.st.Publish(u.name)
	if err != nil {
		return errs.New(errs.Internal, "committing %q: %v", u.name, ioErr(err))
	}
	s.files[u.name] = &blob{info: info, src: src}
	return nil
}

// Abort discards an open upload.
func (s *Store) Abort(id uint64) error {
	u, err := s.lookup(id)
	if err != nil {
		return err
	}
	if !s.drop(u) {
		return u.notFound()
	}
	return nil
}

// detach closes u and removes it from the open set; false if already gone.
func (s *Store) detach(u *upload) bool {
	if !u.close() {
		return false
	}
	s.mu.Lock()
	s.unlist(u)
	s.mu.Unlock()
	return true
}

// drop detaches u and discards its data once in-flight writes end.
func (s *Store) drop(u *upload) bool {
	if !s.detach(u) {
		return false
	}
	u.writers.Wait()
	u.st.Discard()
	return true
}

// OpenUploads counts uploads not yet committed, aborted or expired.
func (s *Store) OpenUploads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.uploads)
}

func (s *Store) janitor() {
	defer close(s.done)
	period := min(max(s.lim.UploadIdleTimeout/4, minSweep), maxSweep)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.expire()
			s.gen.expire() // idle generated blocks go at most one period late
		}
	}
}

// expire aborts uploads idle for longer than the idle timeout.
func (s *Store) expire() {
	deadline := s.now().Add(-s.lim.UploadIdleTimeout).UnixNano()
	s.mu.Lock()
	var idle []*upload
	for _, u := range s.uploads {
		if u.lastActive.Load() < deadline {
			idle = append(idle, u)
		}
	}
	s.mu.Unlock()
	for _, u := range idle {
		s.drop(u)
	}
}

// Open returns a handle on the current version of name (generated content
// for gen: names). Close the handle when done.
func (s *Store) Open(name string) (*Handle, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if content.IsGen(name) {
		g, err := content.ParseGen(name, s.lim.MaxFileSize)
		if err != nil {
			return nil, errs.New(errs.InvalidArgument, "%v", err)
		}
		return &Handle{Name: name, Info: Info{Size: g.Size, CRC: s.gen.crc(g)}, gen: g, gens: s.gen}, nil
	}
	if h, err := s.openCommitted(name); h != nil || err != nil {
		return h, err
	}
	return s.openStored(name)
}

// openCommitted opens the indexed version of name under s.mu, so no commit
// can replace the file between the lookup and the open; nil when the
// index has no such name.
func (s *Store) openCommitted(name string) (*Handle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.files[name]
	if !ok {
		return nil, nil
	}
	r, err := b.src.open(name)
	if err != nil {
		return nil, err
	}
	return &Handle{Name: name, Info: b.info, r: r}, nil
}

// openStored indexes a file left by an earlier run (disk store), computing
// its CRC outside the lock; a commit that raced ahead wins.
func (s *Store) openStored(name string) (*Handle, error) {
	info, src, err := s.back.load(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if _, ok := s.files[name]; !ok {
		s.files[name] = &blob{info: info, src: src}
	}
	s.mu.Unlock()
	h, err := s.openCommitted(name)
	if h == nil && err == nil {
		err = notFound(name)
	}
	return h, err
}

// Stat describes a file.
func (s *Store) Stat(name string) (Info, error) {
	h, err := s.Open(name)
	if err != nil {
		return Info{}, err
	}
	defer h.Close()
	return h.Info, nil
}

func notFound(name string) error {
	return errs.New(errs.NotFound, "file %q not found", name)
}
