//! A trace opened for the page: events paged by position or id through the
//! index, filters and searches run in the background, the analyses
//! computed once.
//!
//! The page shows traces of millions of events, so nothing here reads the
//! whole trace before answering the first request: a page of events is one
//! index lookup and the decoding of one or two chunks. A filter runs on its
//! own thread and publishes the ids it has matched so far; a request for
//! matches waits only until enough of them exist (or briefly, then answers
//! with what there is and says the count is not complete). Matches are
//! kept as ids (8 bytes each), so the position of a match in the filtered
//! list and the position of an event in the whole trace are both known,
//! which is what "open a filtered event in its context" needs.

use std::collections::VecDeque;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};
use vmview_export::{EventWriter, JsonlWriter};
use vmview_filter::EventFilter;
use vmview_format::{ChunkInfo, Event, FormatError, TraceReader};

use crate::analysis::TraceAnalysis;
use crate::timeline::{self, Timeline};
use crate::timeline_cache::{self, CacheConfig, TraceIdentity, Unusable};

type Reader = TraceReader<BufReader<File>>;

/// Most events one page request returns.
pub const MAX_PAGE: u64 = 1_000;
/// Filters kept (with their matches) at once; the oldest is dropped.
const MAX_JOBS: usize = 4;
/// Matches a filter keeps before it stops collecting ids (and only counts).
const MAX_MATCH_IDS: usize = 50_000_000;

/// What went wrong with a request, as the page should hear it.
#[derive(Debug)]
pub enum ApiError {
    /// A bad request; the JSON says why (an expression error has a column).
    Bad(Json),
    /// Reading the trace failed.
    Internal(String),
}

impl From<FormatError> for ApiError {
    fn from(e: FormatError) -> Self {
        ApiError::Internal(e.to_string())
    }
}

/// An opened trace answering the page's questions.
pub struct TraceModel {
    path: PathBuf,
    title: String,
    chunks: Vec<ChunkInfo>,
    /// Position (0-based row in the whole trace) of each chunk's first event.
    starts: Vec<u64>,
    total: u64,
    duration_ns: u64,
    reader: Mutex<Reader>,
    jobs: Mutex<VecDeque<Arc<FilterJob>>>,
    views: Arc<(Mutex<Option<ViewsResult>>, Condvar)>,
    timeline: Arc<(Mutex<Option<TimelineResult>>, Condvar)>,
    /// Events the timeline's index has read.
    indexed: AtomicU64,
    /// [`TraceModel::timeline_source`].
    timeline_source: Mutex<Json>,
    /// The timeline's index while it is built from a clean trace.
    building: timeline::Building,
}

/// The timeline's index, or why it failed.
type TimelineResult = Result<Arc<Timeline>, String>;

/// The analyses' JSON and flame-graph SVG, or why they failed.
type ViewsResult = Result<Arc<(Json, String)>, String>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TraceModel {
    /// Opens a binary trace and reads its index (footer, or chunk headers).
    pub fn open(path: &Path) -> Result<Arc<TraceModel>, FormatError> {
        let mut reader = TraceReader::open(path)?;
        let index = reader.index()?.clone();
        let mut starts = Vec::with_capacity(index.chunks.len());
        let mut total = 0u64;
        for c in &index.chunks {
            starts.push(total);
            total += u64::from(c.event_count);
        }
        let duration_ns = index.chunks.iter().map(|c| c.end_ns).max().unwrap_or(0);
        let title = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Ok(Arc::new(TraceModel {
            path: path.to_path_buf(),
            title,
            chunks: index.chunks,
            starts,
            total,
            duration_ns,
            reader: Mutex::new(reader),
            jobs: Mutex::new(VecDeque::new()),
            views: Arc::new((Mutex::new(None), Condvar::new())),
            timeline: Arc::new((Mutex::new(None), Condvar::new())),
            indexed: AtomicU64::new(0),
            timeline_source: Mutex::new(json!({"from": "trace"})),
            building: timeline::Building::default(),
        }))
    }

    /// Events in the trace (by the index).
    pub fn event_count(&self) -> u64 {
        self.total
    }

    /// Starts computing the analyses on a thread of their own, and the
    /// timeline's index on another; no index is saved.
    pub fn start_analysis(self: &Arc<Self>) {
        self.start_analysis_saving(None)
    }

    /// Like [`start_analysis`](Self::start_analysis); with `cache`, the
    /// timeline's index is read from the directory when a valid one was
    /// saved there for this trace, and else built and then saved there
    /// (when the trace has at least `min_events` events).
    pub fn start_analysis_saving(self: &Arc<Self>, cache: Option<CacheConfig>) {
        let me = Arc::clone(self);
        std::thread::spawn(move || {
            let result = me.compute_views().map(Arc::new);
            let (slot, cond) = &*me.views;
            *lock(slot) = Some(result);
            cond.notify_all();
        });
        // The timeline's index reads the trace again, on another thread:
        // each pass holds only its own summaries.
        let me = Arc::clone(self);
        std::thread::spawn(move || {
            let run = std::panic::AssertUnwindSafe(|| me.index_timeline(cache.as_ref()));
            if std::panic::catch_unwind(run).is_err() {
                // A bug, not the trace: the page hears it instead of
                // waiting for ever (a published index stays).
                let (slot, cond) = &*me.timeline;
                lock(slot).get_or_insert_with(|| {
                    Err("building the timeline's index failed (a vmview bug)".into())
                });
                cond.notify_all();
            }
        });
    }

    /// Loads or builds the timeline's index and publishes it; then saves
    /// a built one.
    fn index_timeline(&self, cache: Option<&CacheConfig>) {
        let limits = timeline::Limits::default();
        let publish = |result: TimelineResult| {
            let (slot, cond) = &*self.timeline;
            *lock(slot) = Some(result);
            cond.notify_all();
        };
        let saved = cache.and_then(|c| match TraceIdentity::of(&self.path) {
            Ok(id) => Some((c, id.file_in(&c.dir), id)),
            Err(e) => {
                eprintln!("vmview: the timeline index will not be saved: {e}");
                None
            }
        });
        if let Some((_, file, id)) = &saved {
            let why = match timeline_cache::load(file, id, limits) {
                Ok(tl) => {
                    eprintln!("vmview: timeline index read from {}", file.display());
                    *lock(&self.timeline_source) =
                        json!({"from": "saved", "file": file.display().to_string()});
                    self.indexed.store(self.total, Ordering::Relaxed);
                    return publish(Ok(Arc::new(tl)));
                }
                Err(Unusable::Missing) => None,
                Err(Unusable::Stale(why)) => Some(format!("is out of date ({why})")),
                Err(Unusable::Damaged(why)) => Some(format!("is damaged ({why})")),
            };
            if let Some(why) = why {
                eprintln!(
                    "vmview: the saved timeline index {} {why}: rebuilding it",
                    file.display()
                );
                *lock(&self.timeline_source) = json!({"from": "trace", "rebuilt": why});
            }
        }
        let built =
            Timeline::build_shared(&self.path, limits, &self.indexed, &self.building).map(Arc::new);
        let tl = built.as_ref().ok().cloned();
        publish(built.map_err(|e| e.to_string()));
        let (Some(tl), Some((c, _, id))) = (tl, saved) else {
            return;
        };
        if self.total < c.min_events {
            return;
        }
        match timeline_cache::save(&c.dir, &id, limits, &tl) {
            Ok((file, bytes)) => {
                eprintln!(
                    "vmview: saved the timeline index to {} ({} MB): the next serve of this trace shows its timeline at once",
                    file.display(),
                    bytes.div_ceil(1 << 20)
                );
                let mut src = lock(&self.timeline_source);
                if let Some(o) = src.as_object_mut() {
                    o.insert("saved".into(), json!(file.display().to_string()));
                }
            }
            Err(e) => eprintln!(
                "vmview: could not save the timeline index in {}: {e}",
                c.dir.display()
            ),
        }
    }

    /// Where the timeline's index came from: `{"from": "trace"}` (built
    /// by reading it; with `rebuilt` when a saved one was not usable, and
    /// `saved` once it was saved) or `{"from": "saved", "file": …}`.
    pub fn timeline_source(&self) -> Json {
        lock(&self.timeline_source).clone()
    }

    /// The timeline's index, waiting up to `timeout` for it; `None` while
    /// it is being built.
    pub fn timeline(&self, timeout: Duration) -> Result<Option<Arc<Timeline>>, ApiError> {
        let (slot, cond) = &*self.timeline;
        let guard = lock(slot);
        let (guard, _) = cond
            .wait_timeout_while(guard, timeout, |v| v.is_none())
            .unwrap_or_else(|p| p.into_inner());
        match &*guard {
            None => Ok(None),
            Some(Ok(v)) => Ok(Some(Arc::clone(v))),
            Some(Err(e)) => Err(ApiError::Internal(e.clone())),
        }
    }

    /// While the timeline's index is built: what is on screen for `view` in
    /// the part of the trace read so far; `None` before its first chunk
    /// (or when the index is built, or by the sequential reader). JSON
    /// text, as [`Timeline::query_text`].
    pub fn partial_timeline(&self, view: timeline::View, threads: &[u32]) -> Option<String> {
        if self.indexed.load(Ordering::Relaxed) == 0 {
            return None;
        }
        lock(&self.building)
            .as_ref()
            .map(|b| b.partial_query(view, threads))
    }

    /// The last chunk's end time (by the index).
    pub fn duration_ns(&self) -> u64 {
        self.duration_ns
    }

    /// The share of the trace the timeline's index has read (0 to 1).
    pub fn timeline_progress(&self) -> f64 {
        if self.total == 0 {
            return 1.0;
        }
        (self.indexed.load(Ordering::Relaxed) as f64 / self.total as f64).min(1.0)
    }

    /// The events with these ids (at most [`MAX_PAGE`]), as a page.
    pub fn by_ids(&self, ids: &mut Vec<u64>) -> Result<Json, ApiError> {
        ids.sort_unstable();
        ids.dedup();
        ids.truncate(MAX_PAGE as usize);
        Ok(self
            .events_by_id(ids, None)?
            .finish(json!({"complete": true})))
    }

    fn compute_views(&self) -> Result<(Json, String), String> {
        let mut reader = TraceReader::open(&self.path).map_err(|e| e.to_string())?;
        let mut analysis = TraceAnalysis::new(self.duration_ns, &self.title);
        analysis.use_header(&reader.header().properties);
        while let Some(ev) = reader.next_event() {
            analysis.event(&ev, reader.symbols());
        }
        analysis.finish(reader.symbols()).map_err(|e| e.to_string())
    }

    /// The analyses, waiting up to `timeout` for them; `None` while they
    /// are still being computed.
    pub fn views(&self, timeout: Duration) -> Result<Option<Arc<(Json, String)>>, ApiError> {
        let (slot, cond) = &*self.views;
        let guard = lock(slot);
        let (guard, _) = cond
            .wait_timeout_while(guard, timeout, |v| v.is_none())
            .unwrap_or_else(|p| p.into_inner());
        match &*guard {
            None => Ok(None),
            Some(Ok(v)) => Ok(Some(Arc::clone(v))),
            Some(Err(e)) => Err(ApiError::Internal(e.clone())),
        }
    }

    /// What the page needs first: the file, its size, its id range.
    pub fn info(&self) -> Json {
        let reader = lock(&self.reader);
        let h = reader.header();
        json!({
            "file": self.title,
            "events": self.total,
            "chunks": self.chunks.len(),
            "first_id": self.chunks.first().map(|c| c.first_id),
            "last_id": self.chunks.last().map(|c| c.last_id),
            "duration_ns": self.duration_ns,
            "pid": h.pid,
            "start_unix_ns": h.start_unix_ns,
            "properties": h.properties.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
            "mode": "serve",
        })
    }

    /// `limit` events from row `offset` of the whole trace, each with a
    /// search mark when `mark` is given.
    pub fn page(
        &self,
        offset: u64,
        limit: u64,
        mark: Option<&mut EventFilter>,
    ) -> Result<Json, ApiError> {
        let limit = limit.min(MAX_PAGE);
        let mut out = PageBuilder::new(mark);
        if offset < self.total && limit > 0 {
            let ci = self.starts.partition_point(|&s| s <= offset) - 1;
            let mut reader = lock(&self.reader);
            reader.seek_to_chunk(&self.chunks[ci])?;
            let mut skip = offset - self.starts[ci];
            while let Some(ev) = reader.next_event() {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                out.push(&ev, reader.symbols());
                if out.len() as u64 >= limit {
                    break;
                }
            }
        }
        Ok(out.finish(json!({"offset": offset, "count": self.total, "complete": true})))
    }

    /// The events with these ids (ascending), in one forward pass per run
    /// of ids that share chunks.
    fn events_by_id<'f>(
        &self,
        ids: &[u64],
        mark: Option<&'f mut EventFilter>,
    ) -> Result<PageBuilder<'f>, ApiError> {
        let mut out = PageBuilder::new(mark);
        let mut reader = lock(&self.reader);
        let mut current: Option<usize> = None;
        for &id in ids {
            let Some(ci) = self.chunk_of(id) else {
                continue;
            };
            if current != Some(ci) {
                reader.seek_to_chunk(&self.chunks[ci])?;
                current = Some(ci);
            }
            loop {
                let Some(ev) = reader.next_event() else {
                    current = None;
                    break;
                };
                if ev.id == id {
                    out.push(&ev, reader.symbols());
                    break;
                }
                if ev.id > id {
                    current = None;
                    break;
                }
            }
        }
        drop(reader);
        Ok(out)
    }

    fn chunk_of(&self, id: u64) -> Option<usize> {
        let i = self.chunks.partition_point(|c| c.last_id < id);
        self.chunks.get(i).filter(|c| c.first_id <= id).map(|_| i)
    }

    /// The row of event `id` in the whole trace (or of the first event after
    /// it when `id` is absent).
    pub fn locate(&self, id: u64) -> Result<Option<u64>, ApiError> {
        let i = self.chunks.partition_point(|c| c.last_id < id);
        let Some(chunk) = self.chunks.get(i) else {
            return Ok(None);
        };
        let mut reader = lock(&self.reader);
        reader.seek_to_chunk(chunk)?;
        let mut row = self.starts[i];
        while let Some(ev) = reader.next_event() {
            if ev.id >= id {
                return Ok(Some(row));
            }
            row += 1;
        }
        Ok(None)
    }

    /// The background job of a filter expression (started if new).
    pub fn job(&self, expr: &str) -> Result<Arc<FilterJob>, ApiError> {
        let expr = expr.trim();
        self.job_of(expr, || parse(expr))
    }

    /// The background job known as `expr`, built by `filter` if new.
    fn job_of(
        &self,
        expr: &str,
        filter: impl FnOnce() -> Result<EventFilter, ApiError>,
    ) -> Result<Arc<FilterJob>, ApiError> {
        let mut jobs = lock(&self.jobs);
        if let Some(j) = jobs.iter().find(|j| j.expr == expr) {
            return Ok(Arc::clone(j));
        }
        let filter = filter()?;
        let job = Arc::new(FilterJob {
            expr: expr.to_string(),
            state: Mutex::new(JobState::default()),
            cond: Condvar::new(),
            cancel: AtomicBool::new(false),
        });
        let runner = Arc::clone(&job);
        let path = self.path.clone();
        std::thread::spawn(move || runner.run(&path, filter));
        jobs.push_back(Arc::clone(&job));
        if jobs.len() > MAX_JOBS {
            if let Some(old) = jobs.pop_front() {
                old.cancel.store(true, Ordering::Relaxed);
            }
        }
        Ok(job)
    }

    /// Rows `offset..offset+limit` of the events matching `expr`: waits up
    /// to `wait` for them to be found, then answers with what there is.
    pub fn filtered_page(
        &self,
        expr: &str,
        offset: u64,
        limit: u64,
        mark: Option<&mut EventFilter>,
        wait: Duration,
    ) -> Result<Json, ApiError> {
        let limit = limit.min(MAX_PAGE);
        let job = self.job(expr)?;
        let want = offset.saturating_add(limit) as usize;
        let (ids, count, complete, scanned) = job.wait(
            wait,
            |s| s.ids.len() >= want || s.complete,
            |s| {
                let from = (offset as usize).min(s.ids.len());
                let to = want.min(s.ids.len());
                (s.ids[from..to].to_vec(), s.count, s.complete, s.scanned)
            },
        );
        let out = self.events_by_id(&ids, mark)?;
        let progress = if self.total == 0 {
            1.0
        } else {
            scanned as f64 / self.total as f64
        };
        Ok(out.finish(
            json!({"offset": offset, "count": count, "complete": complete, "progress": progress}),
        ))
    }

    /// The next (or previous) event after (before) id `from` that matches
    /// `search`, within the events matching `filter` when there is one;
    /// with its row in the list shown (filtered or whole) and its rank
    /// among the search's matches.
    pub fn step(
        &self,
        filter: &str,
        search: &str,
        from: Option<u64>,
        forward: bool,
        wait: Duration,
    ) -> Result<Json, ApiError> {
        if search.trim().is_empty() {
            return Err(ApiError::Bad(json!({"error": "empty search"})));
        }
        // The two expressions are parsed apart and joined as trees, not as
        // text: a filter such as `a == 1) || (true` must not reopen the
        // search's parenthesis. The job's key names the pair unambiguously
        // (no expression starts with a number followed by `:`).
        let job = if filter.trim().is_empty() {
            self.job(search)?
        } else {
            let (f, s) = (filter.trim(), search.trim());
            self.job_of(&format!("{}:{f}&&{s}", f.len()), || {
                Ok(parse(f)?.and(parse(s)?))
            })?
        };
        let found = match (forward, from) {
            (true, from) => {
                let after = |s: &JobState| match from {
                    None => s.ids.first().copied(),
                    Some(f) => s.ids.get(s.ids.partition_point(|&i| i <= f)).copied(),
                };
                job.wait(
                    wait,
                    |s| s.complete || after(s).is_some(),
                    |s| after(s).map(|id| (id, s.ids.partition_point(|&i| i < id))),
                )
            }
            (false, from) => {
                let before = |s: &JobState| {
                    let n = match from {
                        None => s.ids.len(),
                        Some(f) => s.ids.partition_point(|&i| i < f),
                    };
                    n.checked_sub(1).map(|k| (s.ids[k], k))
                };
                job.wait(
                    wait,
                    |s| s.complete || from.is_some_and(|f| s.scanned_id >= f),
                    before,
                )
            }
        };
        let (count, complete) = job.wait(Duration::ZERO, |_| true, |s| (s.count, s.complete));
        let Some((id, rank)) = found else {
            return Ok(json!({"id": null, "count": count, "complete": complete}));
        };
        let row = self.row_in(filter, id, wait)?;
        Ok(json!({"id": id, "rank": rank, "row": row, "count": count, "complete": complete}))
    }

    /// The row of event `id` in the list the page shows: the whole trace,
    /// or the events matching `filter`.
    pub fn row_in(&self, filter: &str, id: u64, wait: Duration) -> Result<Option<u64>, ApiError> {
        if filter.trim().is_empty() {
            return self.locate(id);
        }
        let job = self.job(filter)?;
        Ok(job.wait(
            wait,
            |s| s.complete || s.scanned_id >= id,
            |s| {
                let k = s.ids.partition_point(|&i| i < id);
                (s.ids.get(k) == Some(&id)).then_some(k as u64)
            },
        ))
    }
}

/// Parses an expression, or the error the page shows under its box.
pub fn parse(expr: &str) -> Result<EventFilter, ApiError> {
    EventFilter::parse(if expr.trim().is_empty() { "true" } else { expr }).map_err(|e| {
        ApiError::Bad(
            json!({"error": e.message, "column": e.column, "width": e.width, "expr": expr}),
        )
    })
}

/// A filter running over the whole trace on its own thread.
pub struct FilterJob {
    expr: String,
    state: Mutex<JobState>,
    cond: Condvar,
    cancel: AtomicBool,
}

#[derive(Default)]
pub struct JobState {
    /// Ids of the matches found so far (at most [`MAX_MATCH_IDS`]).
    ids: Vec<u64>,
    /// Matches found so far.
    count: u64,
    /// Events read so far, and the id of the last one.
    scanned: u64,
    scanned_id: u64,
    complete: bool,
}

impl FilterJob {
    fn run(&self, path: &Path, mut filter: EventFilter) {
        let publish =
            |ids: &mut Vec<u64>, count: u64, scanned: u64, scanned_id: u64, complete: bool| {
                let mut s = lock(&self.state);
                let room = MAX_MATCH_IDS.saturating_sub(s.ids.len());
                s.ids.extend(ids.drain(..).take(room));
                s.count = count;
                s.scanned = scanned;
                s.scanned_id = scanned_id;
                s.complete = complete;
                drop(s);
                self.cond.notify_all();
            };
        let mut found = Vec::new();
        let (mut count, mut scanned) = (0u64, 0u64);
        if let Ok(mut reader) = TraceReader::open(path) {
            let mut last_publish = Instant::now();
            while let Some(ev) = reader.next_event() {
                scanned += 1;
                if filter.matches(&ev, reader.symbols()) {
                    count += 1;
                    found.push(ev.id);
                }
                if scanned & 0x3fff == 0 {
                    if self.cancel.load(Ordering::Relaxed) {
                        return;
                    }
                    if !found.is_empty() || last_publish.elapsed() > Duration::from_millis(50) {
                        publish(&mut found, count, scanned, ev.id, false);
                        last_publish = Instant::now();
                    }
                }
            }
        }
        publish(&mut found, count, scanned, u64::MAX, true);
    }

    /// Waits up to `timeout` for `ready`, then reads the state with `read`.
    fn wait<T>(
        &self,
        timeout: Duration,
        ready: impl Fn(&JobState) -> bool,
        read: impl FnOnce(&JobState) -> T,
    ) -> T {
        let guard = lock(&self.state);
        let (guard, _) = self
            .cond
            .wait_timeout_while(guard, timeout, |s| !ready(s))
            .unwrap_or_else(|p| p.into_inner());
        read(&guard)
    }
}

/// Events rendered as the JSON Lines exporter renders them, gathered into
/// one JSON response with their search marks.
struct PageBuilder<'f> {
    jsonl: JsonlWriter<Vec<u8>>,
    marks: Vec<bool>,
    mark: Option<&'f mut EventFilter>,
}

impl<'f> PageBuilder<'f> {
    fn new(mark: Option<&'f mut EventFilter>) -> Self {
        PageBuilder {
            jsonl: JsonlWriter::new(Vec::new()),
            marks: Vec::new(),
            mark,
        }
    }

    fn len(&self) -> usize {
        self.marks.len()
    }

    fn push(&mut self, ev: &Event, syms: &vmview_format::SymbolTable) {
        let marked = self.mark.as_mut().is_some_and(|f| f.matches(ev, syms));
        if self.jsonl.write_event(ev, syms).is_ok() {
            self.marks.push(marked);
        }
    }

    /// `head` with `events` and `marks` added.
    fn finish(self, mut head: Json) -> Json {
        let bytes = self.jsonl.into_inner();
        let events: Vec<Json> = bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect();
        head["events"] = Json::Array(events);
        head["marks"] = json!(self.marks);
        head
    }
}
