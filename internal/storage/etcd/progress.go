package etcd

import "context"

// RequestProgress asks etcd to send a progress notification on every watch
// of this client (every watch sees it, whether or not it set
// WatchOptions.ProgressNotify). The API server's watch cache uses it to
// learn that it has seen every change up to a revision without waiting for
// the periodic notification.
//
// etcd answers only if every watch of the client has caught up with the
// store at that moment, and drops the request otherwise. A new watch
// catches up within about 100ms (etcd's sync interval), so a caller that
// gets no progress asks again.
func (s *Store) RequestProgress(ctx context.Context) error {
	if err := s.watcher.RequestProgress(watchContext(ctx)); err != nil {
		return annotate("request watch progress", err)
	}
	return nil
}
