//! Chunk-level access, for decoding a trace on every core.
//!
//! Chunks are self-contained (each repeats the symbol records its events
//! use, and the per-thread prediction state restarts at each), so any chunk
//! decodes alone, into its own symbol table. [`ChunkFile`] reads one chunk
//! by position, from any thread, and [`ordered_map_fold`] is the engine the
//! aggregating commands share: chunks are decoded (and mapped to a partial
//! result) on a thread pool, a bounded window of them in flight, and the
//! partial results are folded *in file order* on the calling thread, which
//! is where state that crosses chunks (a thread's open calls) lives. The
//! fold sees exactly the sequence the sequential reader would give, so the
//! output is the same byte for byte.
//!
//! Only a trace that reads cleanly is taken apart this way
//! ([`TraceReader::clean_chunks`]); a damaged one goes through the
//! sequential reader, whose recovery and diagnostics stay the reference.
//! A chunk that turns out damaged after all makes the chunk read fail, and
//! the caller starts over sequentially.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use crate::chunk::{ChunkDecoder, MethodPick};
use crate::wire::{readable_version, ChunkHeader, CHUNK_HEADER_LEN};
use crate::{
    ChunkInfo, Event, FormatError, MethodId, Scanned, SymbolTable, TraceHeader, TraceReader,
};

/// A chunk could not be read as its index entry promised: the caller falls
/// back to the sequential reader, which reports what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkFault {
    pub seq: u32,
    pub why: &'static str,
}

/// A clean binary trace, its chunks readable independently and concurrently.
#[derive(Debug)]
pub struct ChunkFile {
    file: File,
    header: TraceHeader,
    chunks: Vec<ChunkInfo>,
}

impl ChunkFile {
    /// `Ok(None)` when the trace does not read cleanly by its index (see
    /// [`TraceReader::clean_chunks`]): read it with a `TraceReader`.
    pub fn open(path: &Path) -> Result<Option<ChunkFile>, FormatError> {
        let mut reader = TraceReader::open(path)?;
        let Some(chunks) = reader.clean_chunks() else {
            return Ok(None);
        };
        Ok(Some(ChunkFile {
            file: File::open(path)?,
            header: reader.header().clone(),
            chunks,
        }))
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// The chunks, in file order (the index footer's entries).
    pub fn chunks(&self) -> &[ChunkInfo] {
        &self.chunks
    }

    /// Decodes chunk `i` (a position in [`chunks`](Self::chunks)), adding
    /// its symbol records to `symbols` and calling `f` on each event with
    /// the table as it stands then. With `skip_values`, parameter values,
    /// returned values and exception messages are stepped over unbuilt
    /// (see `ChunkDecoder::skip_values`): what a filter that tests only
    /// types, threads and symbols needs.
    pub fn for_each_event(
        &self,
        i: usize,
        skip_values: bool,
        symbols: &mut SymbolTable,
        mut f: impl FnMut(Event, &SymbolTable),
    ) -> Result<(), ChunkFault> {
        self.with_chunk(i, skip_values, |dec| {
            while let Some(ev) = dec.next(symbols) {
                f(ev, symbols);
            }
        })
    }

    /// Like [`for_each_event`](Self::for_each_event), but a version 2
    /// chunk's thread streams are read one after another rather than
    /// merged by time (a version 1 chunk reads as always): each event and
    /// each thread's sequence of events are the same, but the order across
    /// threads, and so the ids, are not the trace's. For a caller whose
    /// result depends on neither (per-thread state, sums, minima and
    /// maxima). Every record is read with the same checks as in order.
    pub fn for_each_event_by_thread(
        &self,
        i: usize,
        skip_values: bool,
        symbols: &mut SymbolTable,
        mut f: impl FnMut(Event, &SymbolTable),
    ) -> Result<(), ChunkFault> {
        self.with_chunk(i, skip_values, |dec| {
            dec.any_order = true;
            while let Some(ev) = dec.next(symbols) {
                f(ev, symbols);
            }
        })
    }

    /// Like [`for_each_event`](Self::for_each_event) with `skip_values`,
    /// but each CALL and RETURN comes as a [`Scanned::Head`] (id, thread,
    /// method; nothing built): the fast path of a filter that tests only
    /// types, threads and methods. A chunk is damaged for this exactly
    /// when it is for `for_each_event`.
    pub fn for_each_scanned(
        &self,
        i: usize,
        symbols: &mut SymbolTable,
        mut f: impl FnMut(Scanned, &SymbolTable),
    ) -> Result<(), ChunkFault> {
        self.with_chunk(i, true, |dec| {
            dec.scan_picked(symbols, &mut |ev, syms| {
                f(ev.clone(), syms);
                false
            })
        })
    }

    /// Like [`for_each_scanned`](Self::for_each_scanned), but `f` decides
    /// from each CALL's and RETURN's head (a [`Scanned::Head`]; its answer
    /// is whether to build it) and is then called again with the event
    /// whole, as [`Scanned::Full`], when it answered `true`; other events
    /// come `Full` once. So a CALL or RETURN comes `Full` exactly when it
    /// was picked, decoded with its values unless `skip_values`. A filter
    /// that selects by type, thread and method builds in one pass the
    /// events it keeps, and no others.
    ///
    /// With `any_order`, a version 2 chunk's thread streams are read one
    /// after another rather than merged by time (a version 1 chunk reads
    /// as always): each event is the same, but their order and ids are not
    /// the trace's, for a caller that only counts what no id decides. Every
    /// record is read with the same checks as in order.
    pub fn for_each_picked(
        &self,
        i: usize,
        skip_values: bool,
        any_order: bool,
        symbols: &mut SymbolTable,
        mut f: impl FnMut(&Scanned, &SymbolTable) -> bool,
    ) -> Result<(), ChunkFault> {
        self.with_chunk(i, skip_values, |dec| {
            dec.any_order = any_order;
            dec.scan_picked(symbols, &mut f)
        })
    }

    /// The scan of an expression decided by an event's type and method
    /// alone: like [`for_each_picked`](Self::for_each_picked), but `scan`
    /// decides for a CALL or RETURN of a method once per chunk
    /// ([`MethodScan::verdict`]), and the answer is looked up for every
    /// other CALL and RETURN of that method. With `build`,
    /// [`MethodScan::event`] gets the picked CALLs and RETURNs whole
    /// (values only without `skip_values`); without, they are only
    /// counted. It gets every other event whole; the rest are stepped
    /// over with the same checks as a full decode. `any_order` as for
    /// `for_each_picked`; without `build` as well, a version 2 chunk's
    /// times are stepped over, not read, and the `time_ns` of the events
    /// `scan` gets means nothing (a count by type and method reads none).
    /// Returns how many CALLs and RETURNs were picked.
    pub fn for_each_method_match(
        &self,
        i: usize,
        skip_values: bool,
        any_order: bool,
        build: bool,
        symbols: &mut SymbolTable,
        scan: &mut impl MethodScan,
    ) -> Result<u64, ChunkFault> {
        let mut picked = 0;
        self.with_chunk(i, skip_values, |dec| {
            dec.any_order = any_order;
            let mut verdicts = std::mem::take(&mut dec.verdicts);
            verdicts.clear();
            let kinds = [scan.can_pick(false), scan.can_pick(true)];
            // Built or only counted: two loops, so a count's has no
            // event building in it.
            if build {
                let mut p = MethodPick::<_, true> {
                    kinds,
                    scan,
                    verdicts: &mut verdicts,
                    picked: 0,
                };
                if !any_order && dec.is_v2() {
                    // In order, without the merge by time.
                    dec.scan_ranked(symbols, &mut p);
                } else {
                    dec.scan_heads(symbols, &mut p);
                }
                picked = p.picked;
            } else {
                let mut p = MethodPick::<_, false> {
                    kinds,
                    scan,
                    verdicts: &mut verdicts,
                    picked: 0,
                };
                dec.scan_heads(symbols, &mut p);
                picked = p.picked;
            }
            dec.verdicts = verdicts;
        })?;
        Ok(picked)
    }

    /// Reads and checks chunk `i`, runs `decode` over it on this thread's
    /// decoder, and checks the decoded totals against the header.
    fn with_chunk(
        &self,
        i: usize,
        skip_values: bool,
        decode: impl FnOnce(&mut ChunkDecoder),
    ) -> Result<(), ChunkFault> {
        let info = &self.chunks[i];
        let fault = |why| ChunkFault { seq: info.seq, why };
        let mut hb = [0u8; CHUNK_HEADER_LEN];
        self.file
            .read_exact_at(&mut hb, info.offset)
            .map_err(|_| fault("its header cannot be read"))?;
        let h = ChunkHeader::decode(&hb).map_err(|_| fault("its header is damaged"))?;
        if h.info(info.offset) != *info {
            return Err(fault("its header disagrees with the index"));
        }
        if !readable_version(h.version) {
            return Err(fault("it is in another format version"));
        }
        // Each pool thread keeps its decoder, and so its payload buffer:
        // a fresh megabyte per chunk cost more in page faults than the
        // decoding of some chunks.
        thread_local! {
            static DECODER: std::cell::RefCell<ChunkDecoder> = Default::default();
        }
        DECODER.with(|cell| {
            let mut dec = cell.take();
            let r = (|| {
                dec.skip_values = skip_values;
                dec.any_order = false;
                dec.payload.resize(h.payload_len as usize, 0);
                self.file
                    .read_exact_at(&mut dec.payload, info.offset + CHUNK_HEADER_LEN as u64)
                    .map_err(|_| fault("its payload cannot be read"))?;
                if crc32c::crc32c(&dec.payload) != h.payload_crc {
                    return Err(fault("its payload fails its checksum"));
                }
                dec.start(h, info.offset);
                decode(&mut dec);
                if dec.take_error().is_some() {
                    return Err(fault("its payload cannot be decoded"));
                }
                let totals_match = dec.decoded == h.event_count
                    && dec.first_id == Some(h.first_id)
                    && dec.last_id == Some(h.last_id);
                if !totals_match {
                    return Err(fault("its events disagree with its header"));
                }
                Ok(())
            })();
            cell.replace(dec);
            r
        })
    }

    /// Decodes chunk `i` into its symbol table and events.
    pub fn decode(&self, i: usize) -> Result<DecodedChunk, ChunkFault> {
        let mut symbols = SymbolTable::default();
        let mut events = Vec::with_capacity(self.chunks[i].event_count.min(1 << 20) as usize);
        self.for_each_event(i, false, &mut symbols, |ev, _| events.push(ev))?;
        Ok(DecodedChunk { symbols, events })
    }
}

/// What [`ChunkFile::for_each_method_match`] asks of its caller.
pub trait MethodScan {
    /// Whether a RETURN (`ret`) or CALL of `method` is picked. Asked once
    /// per chunk and kind for each method the symbol table knows (and the
    /// answer reused), so it must depend on nothing but its arguments and
    /// the method's symbol; asked again each time for a method the table
    /// does not know.
    fn verdict(&mut self, ret: bool, method: MethodId, symbols: &SymbolTable) -> bool;
    /// Whether a RETURN (`ret`) or CALL of any method can be picked; when
    /// not, [`verdict`](Self::verdict) is not asked for that kind.
    fn can_pick(&self, ret: bool) -> bool {
        let _ = ret;
        true
    }
    /// A picked CALL or RETURN, or any other event, whole.
    fn event(&mut self, ev: Event, symbols: &SymbolTable);
}

/// One chunk's symbols and events, decoded.
#[derive(Debug, Default)]
pub struct DecodedChunk {
    pub symbols: SymbolTable,
    pub events: Vec<Event>,
}

/// How many threads to decode on: `VMVIEW_THREADS` when set to a positive
/// number, else the cores this process may run on.
pub fn decode_threads() -> usize {
    std::env::var("VMVIEW_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Whether `VMVIEW_THREADS=1` asks for the sequential reader: the
/// reference every chunked path is compared against, so it stays the path
/// taken then even where reading by chunks on one core would be faster.
pub fn in_order_asked() -> bool {
    std::env::var("VMVIEW_THREADS").is_ok_and(|v| v.trim() == "1")
}

/// Runs `map` on `0..n` on `threads` pool threads, at most `window` items
/// in flight (so memory is bounded by `window` partial results), and feeds
/// the results to `fold` in index order on the calling thread. `fold`
/// returning `false` stops the run: items not yet started are not mapped.
/// Returns whether every item was folded.
pub fn ordered_map_fold<T: Send>(
    threads: usize,
    n: usize,
    window: usize,
    map: impl Fn(usize) -> T + Sync,
    mut fold: impl FnMut(T) -> bool,
) -> bool {
    let pool = match rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .thread_name(|i| format!("vmview-decode-{i}"))
        .build()
    {
        Ok(p) => p,
        Err(_) => {
            // No threads to be had: the same work, here.
            return (0..n).all(|i| fold(map(i)));
        }
    };
    let window = window.max(1);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<(usize, Option<T>)>();
    let (map, stop_ref) = (&map, &stop);
    let mut completed = true;
    pool.in_place_scope(|s| {
        let spawn = |i: usize| {
            let tx = tx.clone();
            s.spawn(move |_| {
                let r = (!stop_ref.load(Ordering::Relaxed)).then(|| map(i));
                let _ = tx.send((i, r));
            });
        };
        let mut next_spawn = 0;
        while next_spawn < n.min(window) {
            spawn(next_spawn);
            next_spawn += 1;
        }
        // Results that arrived ahead of their turn, by index - next_fold.
        let mut pending: VecDeque<Option<Option<T>>> = VecDeque::new();
        let mut next_fold = 0;
        while next_fold < n {
            while !matches!(pending.front(), Some(Some(_))) {
                let Ok((i, r)) = rx.recv() else { break };
                let k = i - next_fold;
                if pending.len() <= k {
                    pending.resize_with(k + 1, || None);
                }
                pending[k] = Some(r);
            }
            let Some(Some(r)) = pending.pop_front() else {
                completed = false;
                break;
            };
            next_fold += 1;
            let go_on = match r {
                Some(r) => fold(r),
                None => false,
            };
            if !go_on {
                completed = false;
                stop.store(true, Ordering::Relaxed);
                break;
            }
            if next_spawn < n {
                spawn(next_spawn);
                next_spawn += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    completed
}
