// Package tracking knows who holds each composebox project. Every resource of a sample carries
// the owner label of the process that created it (see package labels), so a fresh process can
// tell a crashed run's leftovers (stale) from live ones. On top of the labels it keeps:
//   - owners' liveness (OwnerStatus) and the listing of projects with their status (List),
//     as backend.Project, the one description of a project every backend gives;
//   - a state cache of held tasks and live samples (Cache), which is only a cache;
//   - selection of projects to remove (Plan and Sweep, by a backend.Selector), the removal
//     itself being package cleanup's;
//   - the watchdog that removes a dead owner's projects (Reap on Docker engines, ReapBackend
//     through any backend's own verbs, and the re-executed process StartReaper starts and
//     ReaperMain or ReaperMainWith runs, the latter rebuilding the owner's backend from its
//     description);
//   - the hand-over of a sample as detached (MarkDetached).
package tracking
