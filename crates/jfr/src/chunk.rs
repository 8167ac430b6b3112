//! One JFR chunk, decoded generically: its header, the type definitions of
//! its metadata event, its constant pools and its events as trees of
//! [`Value`]s, all driven by the metadata (no event layout is compiled in).
//!
//! A chunk is self-contained: the header points at the last metadata event
//! (a superset of any earlier one) and at the last checkpoint event, whose
//! delta field chains back through every earlier checkpoint, so the pools
//! are read first, in one walk, and the events then in file order. A
//! damaged chunk is reported by a [`Damage`] at the offset where its bytes
//! stopped making sense.

use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::wire::{Cursor, Damage, JString, Result};

/// The fixed header's length in bytes.
pub const HEADER_BYTES: usize = 68;
/// `FLR\0`.
pub const MAGIC: &[u8; 4] = b"FLR\0";
/// Nested inline values deeper than this are refused (a damaged metadata
/// event can describe a type that contains itself).
const MAX_NESTING: u32 = 24;
/// References followed one after another before giving up (a damaged pool
/// can refer to itself).
const MAX_HOPS: u32 = 8;

/// The fixed part at the start of every chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkHeader {
    pub major: u16,
    pub minor: u16,
    /// Whole chunk, header included.
    pub size: u64,
    pub constant_pool_offset: u64,
    pub metadata_offset: u64,
    pub start_unix_ns: i64,
    pub duration_ns: i64,
    pub start_ticks: i64,
    pub ticks_per_second: i64,
    /// Integers are LEB128-compressed (flag bit 0).
    pub compressed: bool,
}

impl ChunkHeader {
    /// Parses the 68 header bytes (no check against the file length).
    pub fn parse(b: &[u8]) -> std::result::Result<ChunkHeader, String> {
        if b.len() < HEADER_BYTES {
            return Err(format!(
                "{} bytes, shorter than a chunk header ({HEADER_BYTES})",
                b.len()
            ));
        }
        if &b[..4] != MAGIC {
            return Err("no chunk magic FLR\\0".to_string());
        }
        let mut c = Cursor::new(b, 4, HEADER_BYTES, false);
        let major = c.be_i16().unwrap_or(0) as u16;
        let minor = c.be_i16().unwrap_or(0) as u16;
        if !(1..=2).contains(&major) {
            return Err(format!(
                "JFR format version {major}.{minor} (this vmview reads 1.x and 2.x)"
            ));
        }
        let mut next = || c.be_i64().unwrap_or(0);
        let size = next();
        let constant_pool_offset = next();
        let metadata_offset = next();
        let start_unix_ns = next();
        let duration_ns = next();
        let start_ticks = next();
        let ticks_per_second = next();
        let flags = b[67];
        let h = ChunkHeader {
            major,
            minor,
            size: size.max(0) as u64,
            constant_pool_offset: constant_pool_offset.max(0) as u64,
            metadata_offset: metadata_offset.max(0) as u64,
            start_unix_ns,
            duration_ns,
            start_ticks,
            ticks_per_second,
            compressed: flags & 1 != 0,
        };
        if h.ticks_per_second <= 0 {
            return Err(format!(
                "{} ticks per second in the chunk header",
                h.ticks_per_second
            ));
        }
        Ok(h)
    }

    /// Ticks of this chunk's clock as ns since the Unix epoch.
    pub fn unix_ns(&self, ticks: i64) -> i64 {
        let d = i128::from(ticks) - i128::from(self.start_ticks);
        let ns = d * 1_000_000_000 / i128::from(self.ticks_per_second);
        (i128::from(self.start_unix_ns) + ns).clamp(0, i128::from(i64::MAX)) as i64
    }

    /// A span of ticks in ns.
    pub fn span_ns(&self, ticks: i64) -> u64 {
        let ns = i128::from(ticks.max(0)) * 1_000_000_000 / i128::from(self.ticks_per_second);
        ns.min(i128::from(u64::MAX >> 1)) as u64
    }
}

/// How a primitive type is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prim {
    Boolean,
    Byte,
    Char,
    Short,
    Int,
    Long,
    Float,
    Double,
    String,
}

/// What a numeric field's value counts, as far as vmview converts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Plain,
    /// A duration in the chunk's ticks.
    TimespanTicks,
    /// A point in time in the chunk's ticks.
    TimestampTicks,
}

/// One field of a type, as the metadata declares it.
#[derive(Debug, Clone)]
pub struct Field {
    pub name: Box<str>,
    /// Index of the field's type in [`Metadata::classes`].
    pub class: u32,
    /// Stored as a constant pool key.
    pub pooled: bool,
    /// An array of the type.
    pub array: bool,
    pub unit: Unit,
}

/// A type: an event, a pooled type (`java.lang.Thread`,
/// `jdk.types.StackTrace`, …), an inline struct or a primitive.
#[derive(Debug, Clone)]
pub struct Class {
    pub id: i64,
    pub name: Box<str>,
    pub super_type: Option<Box<str>>,
    pub prim: Option<Prim>,
    pub fields: Vec<Field>,
}

impl Class {
    /// Position of the field named `name`.
    pub fn field(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| &*f.name == name)
    }
}

/// The types of a chunk.
#[derive(Debug, Default)]
pub struct Metadata {
    pub classes: Vec<Class>,
    by_id: FxHashMap<i64, u32>,
    /// Index of `java.lang.String`, for string pool references.
    pub string_class: Option<u32>,
}

impl Metadata {
    pub fn class_of_id(&self, id: i64) -> Option<u32> {
        self.by_id.get(&id).copied()
    }
    pub fn class(&self, idx: u32) -> &Class {
        &self.classes[idx as usize]
    }
    pub fn by_name(&self, name: &str) -> Option<u32> {
        self.classes
            .iter()
            .position(|c| &*c.name == name)
            .map(|i| i as u32)
    }
}

/// A decoded value. Objects list their fields in metadata order.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Box<str>),
    /// A constant pool entry of type `class` (an index in
    /// [`Metadata::classes`]) under `key`.
    Ref {
        class: u32,
        key: i64,
    },
    Object {
        class: u32,
        fields: Box<[Value]>,
    },
    Array(Box<[Value]>),
}

/// One event of the chunk, undecoded beyond its type.
#[derive(Debug, Clone, Copy)]
pub struct RawEvent {
    /// Offset of the event in the chunk.
    pub offset: usize,
    pub size: usize,
    pub type_id: i64,
}

/// A metadata event's bytes (from its metadata id on) and its types.
pub type KnownMetadata = (Vec<u8>, Rc<Metadata>);

/// A chunk's bytes with its types and constant pools.
pub struct Chunk {
    pub header: ChunkHeader,
    pub meta: Rc<Metadata>,
    pools: FxHashMap<(u32, i64), Value>,
    bytes: Vec<u8>,
}

impl Chunk {
    /// Decodes the metadata and the constant pools of a whole chunk
    /// (`bytes` from its magic to its end). `known` is the previous
    /// chunk's metadata event and types: the chunks of one recording
    /// usually repeat the same metadata, which is then not decoded again.
    /// Returns the chunk and its metadata event's bytes.
    pub fn parse(
        header: ChunkHeader,
        bytes: Vec<u8>,
        known: Option<&KnownMetadata>,
    ) -> Result<(Chunk, Option<KnownMetadata>)> {
        // The types, from the metadata id on (its time stamps differ
        // from chunk to chunk).
        let raw = metadata_bytes(&bytes, &header)?;
        let mut c = Cursor::new(raw, 0, raw.len(), header.compressed);
        for _ in 0..4 {
            c.long()?;
        }
        let raw = &raw[c.pos()..];
        let (meta, fresh) = match known {
            Some((b, m)) if b.as_slice() == raw => (m.clone(), None),
            _ => {
                let m = Rc::new(read_metadata(&bytes, &header)?);
                (m.clone(), Some((raw.to_vec(), m)))
            }
        };
        let mut chunk = Chunk {
            header,
            meta,
            pools: FxHashMap::default(),
            bytes,
        };
        chunk.read_pools()?;
        Ok((chunk, fresh))
    }

    fn cursor(&self, at: usize) -> Cursor<'_> {
        Cursor::new(&self.bytes, at, self.bytes.len(), self.header.compressed)
    }

    /// Walks the checkpoint chain back from the header's offset.
    fn read_pools(&mut self) -> Result<()> {
        let mut at = self.header.constant_pool_offset as i64;
        // Checkpoint events do not overlap, so together they are no
        // longer than the chunk: a forged chain that loops or overlaps is
        // stopped before it costs more than one pass over the chunk.
        let mut budget = self.bytes.len();
        let mut pools = std::mem::take(&mut self.pools);
        while at != 0 {
            if at < HEADER_BYTES as i64 || at as usize >= self.bytes.len() {
                return Err(Damage {
                    offset: at.max(0) as usize,
                    what: format!("a checkpoint event at offset {at}, outside the chunk"),
                });
            }
            let mut outer = self.cursor(at as usize);
            let size = outer.int()?;
            let mut c = Cursor::new(
                &self.bytes,
                at as usize,
                (at as usize).saturating_add(size.max(0) as usize),
                self.header.compressed,
            );
            if size <= 0 || c.remaining() < size as usize {
                return Err(c.damage(format!("a checkpoint event of {size} bytes")));
            }
            if size as usize > budget {
                return Err(c.damage("checkpoint events that do not overlap or loop"));
            }
            budget -= size as usize;
            c.int()?;
            let ty = c.long()?;
            if ty != 1 {
                return Err(c.damage(format!("a checkpoint event (type 1), found type {ty}")));
            }
            c.long()?; // start time
            c.long()?; // duration
            let delta = c.long()?;
            c.u8()?; // checkpoint kind (flush, chunk header, statics, thread)
            let pool_count = c.count(2, "constant pools")?;
            for _ in 0..pool_count {
                let type_id = c.long()?;
                let Some(class) = self.meta.class_of_id(type_id) else {
                    return Err(c.damage(format!("a constant pool of undeclared type {type_id}")));
                };
                let n = c.count(1, "constants")?;
                for _ in 0..n {
                    let key = c.long()?;
                    let v = read_value(&mut c, &self.meta, class, 0)?;
                    // A newer checkpoint (read first) wins over an older one.
                    pools.entry((class, key)).or_insert(v);
                }
            }
            if delta == 0 {
                break;
            }
            at = at.saturating_add(delta);
        }
        self.pools = pools;
        Ok(())
    }

    /// The events in file order, metadata and checkpoint events left out.
    /// Stops with a [`Damage`] where an event's size cannot be right.
    pub fn events(&self) -> Events<'_> {
        Events {
            chunk: self,
            at: HEADER_BYTES,
            done: false,
        }
    }

    /// Decodes one event's fields.
    pub fn decode(&self, ev: &RawEvent) -> Result<(u32, Value)> {
        let Some(class) = self.meta.class_of_id(ev.type_id) else {
            return Err(self
                .cursor(ev.offset)
                .damage(format!("an event of undeclared type {}", ev.type_id)));
        };
        let mut c = Cursor::new(
            &self.bytes,
            ev.offset,
            ev.offset + ev.size,
            self.header.compressed,
        );
        c.int()?;
        c.long()?;
        Ok((class, read_value(&mut c, &self.meta, class, 0)?))
    }

    /// Follows pool references to the value they stand for (`None` for a
    /// key the chunk does not define, or a reference loop).
    pub fn resolve<'a>(&'a self, mut v: &'a Value) -> Option<&'a Value> {
        for _ in 0..MAX_HOPS {
            match v {
                Value::Ref { class, key } => v = self.pools.get(&(*class, *key))?,
                _ => return Some(v),
            }
        }
        None
    }

    /// The field `name` of an object (resolved through references).
    pub fn field<'a>(&'a self, v: &'a Value, name: &str) -> Option<&'a Value> {
        match self.resolve(v)? {
            Value::Object { class, fields } => {
                let i = self.meta.class(*class).field(name)?;
                fields.get(i).and_then(|f| self.resolve(f))
            }
            _ => None,
        }
    }

    /// A string value: inline, from the string pool, or a
    /// `jdk.types.Symbol`'s text.
    pub fn string<'a>(&'a self, v: &'a Value) -> Option<&'a str> {
        match self.resolve(v)? {
            Value::Str(s) => Some(s),
            Value::Object { .. } => self.field(v, "string").and_then(|s| match s {
                Value::Str(s) => Some(&**s),
                _ => None,
            }),
            _ => None,
        }
    }

    pub fn int(&self, v: &Value) -> Option<i64> {
        match self.resolve(v)? {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The class of a resolved object.
    pub fn class_of(&self, v: &Value) -> Option<&Class> {
        match self.resolve(v)? {
            Value::Object { class, .. } => Some(self.meta.class(*class)),
            _ => None,
        }
    }
}

/// Iterator over a chunk's events.
pub struct Events<'a> {
    chunk: &'a Chunk,
    at: usize,
    done: bool,
}

impl Iterator for Events<'_> {
    type Item = Result<RawEvent>;

    fn next(&mut self) -> Option<Result<RawEvent>> {
        loop {
            if self.done || self.at >= self.chunk.bytes.len() {
                return None;
            }
            let mut c = self.chunk.cursor(self.at);
            let head = c.int().and_then(|size| Ok((size, c.long()?)));
            let (size, type_id) = match head {
                Ok(h) => h,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            if size <= 0 || size as usize > self.chunk.bytes.len() - self.at {
                self.done = true;
                return Some(Err(Damage {
                    offset: self.at,
                    what: format!(
                        "an event of {size} bytes with {} left in the chunk",
                        self.chunk.bytes.len() - self.at
                    ),
                }));
            }
            let ev = RawEvent {
                offset: self.at,
                size: size as usize,
                type_id,
            };
            self.at += size as usize;
            if type_id > 1 {
                return Some(Ok(ev));
            }
        }
    }
}

/// One value of type `class` at the cursor.
fn read_value(c: &mut Cursor<'_>, meta: &Metadata, class: u32, depth: u32) -> Result<Value> {
    if depth > MAX_NESTING {
        return Err(c.damage(format!("values nested more than {MAX_NESTING} deep")));
    }
    let cls = meta.class(class);
    if let Some(p) = cls.prim {
        return read_prim(c, p, meta.string_class);
    }
    let mut fields = Vec::with_capacity(cls.fields.len());
    for f in &cls.fields {
        fields.push(read_field(c, meta, f, depth)?);
    }
    Ok(Value::Object {
        class,
        fields: fields.into_boxed_slice(),
    })
}

fn read_field(c: &mut Cursor<'_>, meta: &Metadata, f: &Field, depth: u32) -> Result<Value> {
    if f.array {
        let n = c.count(1, "array elements")?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(read_single(c, meta, f, depth)?);
        }
        Ok(Value::Array(items.into_boxed_slice()))
    } else {
        read_single(c, meta, f, depth)
    }
}

fn read_single(c: &mut Cursor<'_>, meta: &Metadata, f: &Field, depth: u32) -> Result<Value> {
    if f.pooled {
        Ok(Value::Ref {
            class: f.class,
            key: c.long()?,
        })
    } else {
        read_value(c, meta, f.class, depth + 1)
    }
}

fn read_prim(c: &mut Cursor<'_>, p: Prim, string_class: Option<u32>) -> Result<Value> {
    Ok(match p {
        Prim::Boolean => Value::Bool(c.u8()? != 0),
        Prim::Byte => Value::Int(i64::from(c.u8()? as i8)),
        Prim::Char => Value::Int(i64::from(c.short()? as u16)),
        Prim::Short => Value::Int(i64::from(c.short()?)),
        Prim::Int => Value::Int(i64::from(c.int()?)),
        Prim::Long => Value::Int(c.long()?),
        Prim::Float => Value::Float(f64::from(c.f32()?)),
        Prim::Double => Value::Float(c.f64()?),
        Prim::String => match c.string()? {
            JString::Null => Value::Null,
            JString::Text(s) => Value::Str(s),
            JString::Pool(key) => Value::Ref {
                class: string_class.unwrap_or(u32::MAX),
                key,
            },
        },
    })
}

/// One element of the metadata event's tree.
struct Element {
    name: u32,
    attrs: Vec<(u32, u32)>,
    children: Vec<Element>,
}

fn read_element(c: &mut Cursor<'_>, strings: usize, depth: u32) -> Result<Element> {
    if depth > 8 {
        return Err(c.damage("metadata elements nested more than 8 deep"));
    }
    let idx = |c: &mut Cursor<'_>| -> Result<u32> {
        let at = c.pos();
        let i = c.int()?;
        if i < 0 || i as usize >= strings {
            return Err(Damage {
                offset: at,
                what: format!("metadata string {i} of {strings}"),
            });
        }
        Ok(i as u32)
    };
    let name = idx(c)?;
    let n = c.count(2, "metadata attributes")?;
    let mut attrs = Vec::with_capacity(n);
    for _ in 0..n {
        attrs.push((idx(c)?, idx(c)?));
    }
    let n = c.count(3, "metadata elements")?;
    let mut children = Vec::with_capacity(n);
    for _ in 0..n {
        children.push(read_element(c, strings, depth + 1)?);
    }
    Ok(Element {
        name,
        attrs,
        children,
    })
}

fn prim_of(name: &str) -> Option<Prim> {
    Some(match name {
        "boolean" => Prim::Boolean,
        "byte" => Prim::Byte,
        "char" => Prim::Char,
        "short" => Prim::Short,
        "int" => Prim::Int,
        "long" => Prim::Long,
        "float" => Prim::Float,
        "double" => Prim::Double,
        "java.lang.String" => Prim::String,
        _ => return None,
    })
}

/// The bytes of the metadata event the header points at.
fn metadata_bytes<'a>(bytes: &'a [u8], h: &ChunkHeader) -> Result<&'a [u8]> {
    let at = h.metadata_offset as usize;
    if at < HEADER_BYTES || at >= bytes.len() {
        return Err(Damage {
            offset: at,
            what: format!("a metadata event at offset {at}, outside the chunk"),
        });
    }
    let mut outer = Cursor::new(bytes, at, bytes.len(), h.compressed);
    let size = outer.int()?;
    if size <= 0 || size as usize > bytes.len() - at {
        return Err(outer.damage(format!("a metadata event of {size} bytes")));
    }
    Ok(&bytes[at..at + size as usize])
}

/// Reads the metadata event the header points at into types.
fn read_metadata(bytes: &[u8], h: &ChunkHeader) -> Result<Metadata> {
    let at = h.metadata_offset as usize;
    let size = metadata_bytes(bytes, h)?.len();
    let mut c = Cursor::new(bytes, at, at + size, h.compressed);
    c.int()?;
    let ty = c.long()?;
    if ty != 0 {
        return Err(c.damage(format!("the metadata event (type 0), found type {ty}")));
    }
    c.long()?; // start
    c.long()?; // duration
    c.long()?; // metadata id
    let n = c.count(1, "metadata strings")?;
    let mut strings: Vec<Box<str>> = Vec::with_capacity(n);
    for _ in 0..n {
        strings.push(match c.string()? {
            JString::Text(s) => s,
            _ => "".into(),
        });
    }
    let root = read_element(&mut c, strings.len(), 0)?;
    let s = |i: u32| &*strings[i as usize];
    let attr = |e: &Element, key: &str| {
        e.attrs
            .iter()
            .find(|(k, _)| s(*k) == key)
            .map(|(_, v)| s(*v))
    };
    // Class elements are under root > metadata > class.
    let mut class_elems = Vec::new();
    for m in root.children.iter().filter(|e| s(e.name) == "metadata") {
        class_elems.extend(m.children.iter().filter(|e| s(e.name) == "class"));
    }
    let mut meta = Metadata::default();
    for e in &class_elems {
        let id = attr(e, "id").and_then(|v| v.parse::<i64>().ok());
        let (Some(id), Some(name)) = (id, attr(e, "name")) else {
            return Err(c.damage("a metadata class without an id or a name"));
        };
        meta.by_id.insert(id, meta.classes.len() as u32);
        meta.classes.push(Class {
            id,
            name: name.into(),
            super_type: attr(e, "superType").map(Into::into),
            prim: prim_of(name),
            fields: Vec::new(),
        });
    }
    for (i, e) in class_elems.iter().enumerate() {
        let mut fields = Vec::new();
        for f in e.children.iter().filter(|f| s(f.name) == "field") {
            let ty = attr(f, "class").and_then(|v| v.parse::<i64>().ok());
            let Some(class) = ty.and_then(|t| meta.class_of_id(t)) else {
                return Err(c.damage(format!(
                    "field {} of {} has an undeclared type",
                    attr(f, "name").unwrap_or("?"),
                    meta.classes[i].name
                )));
            };
            let mut unit = Unit::Plain;
            for a in f.children.iter().filter(|a| s(a.name) == "annotation") {
                let ac = attr(a, "class")
                    .and_then(|v| v.parse::<i64>().ok())
                    .and_then(|t| meta.class_of_id(t))
                    .map(|t| &*meta.classes[t as usize].name);
                let ticks = attr(a, "value") == Some("TICKS");
                match ac {
                    Some("jdk.jfr.Timespan") if ticks => unit = Unit::TimespanTicks,
                    Some("jdk.jfr.Timestamp") if ticks => unit = Unit::TimestampTicks,
                    _ => {}
                }
            }
            fields.push(Field {
                name: attr(f, "name").unwrap_or("").into(),
                class,
                pooled: attr(f, "constantPool") == Some("true"),
                array: attr(f, "dimension").is_some_and(|d| d != "0"),
                unit,
            });
        }
        meta.classes[i].fields = fields;
    }
    meta.string_class = meta.by_name("java.lang.String");
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leb(out: &mut Vec<u8>, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    /// A record with its size first, as a 4-byte padded compressed int
    /// (as the JDK writes it).
    fn record(body: &[u8]) -> Vec<u8> {
        let n = body.len() as u32 + 4;
        let mut out = vec![
            (n & 0x7f) as u8 | 0x80,
            ((n >> 7) & 0x7f) as u8 | 0x80,
            ((n >> 14) & 0x7f) as u8 | 0x80,
            ((n >> 21) & 0x7f) as u8,
        ];
        out.extend_from_slice(body);
        out
    }

    /// Types: 10 long, 11 java.lang.String, 20 test.Event { value: long,
    /// text: String (pooled) }.
    fn metadata() -> Vec<u8> {
        let strings = [
            "root",
            "metadata",
            "class",
            "field",
            "id",
            "name",
            "constantPool",
            "true",
            "10",
            "long",
            "11",
            "java.lang.String",
            "20",
            "test.Event",
            "value",
            "text",
        ];
        let idx = |s: &str| strings.iter().position(|x| *x == s).unwrap() as u64;
        let mut b = Vec::new();
        for v in [0, 0, 0, 1] {
            leb(&mut b, v); // type 0, start, duration, metadata id
        }
        leb(&mut b, strings.len() as u64);
        for s in strings {
            b.push(3);
            leb(&mut b, s.len() as u64);
            b.extend_from_slice(s.as_bytes());
        }
        let attrs = |b: &mut Vec<u8>, list: &[(&str, &str)]| {
            leb(b, list.len() as u64);
            for (k, v) in list {
                leb(b, idx(k));
                leb(b, idx(v));
            }
        };
        leb(&mut b, idx("root"));
        attrs(&mut b, &[]);
        leb(&mut b, 1);
        leb(&mut b, idx("metadata"));
        attrs(&mut b, &[]);
        leb(&mut b, 3);
        for (id, name) in [("10", "long"), ("11", "java.lang.String")] {
            leb(&mut b, idx("class"));
            attrs(&mut b, &[("id", id), ("name", name)]);
            leb(&mut b, 0);
        }
        leb(&mut b, idx("class"));
        attrs(&mut b, &[("id", "20"), ("name", "test.Event")]);
        leb(&mut b, 2);
        leb(&mut b, idx("field"));
        attrs(&mut b, &[("name", "value"), ("class", "10")]);
        leb(&mut b, 0);
        leb(&mut b, idx("field"));
        attrs(
            &mut b,
            &[("name", "text"), ("class", "11"), ("constantPool", "true")],
        );
        leb(&mut b, 0);
        record(&b)
    }

    /// A checkpoint event with one string constant; `delta` to the one before.
    fn checkpoint(delta: i64, key: u64, text: &str) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [1, 0, 0] {
            leb(&mut b, v);
        }
        // Always nine bytes, so that a delta's value never moves what follows.
        let d = delta as u64;
        for i in 0..8 {
            b.push(((d >> (7 * i)) & 0x7f) as u8 | 0x80);
        }
        b.push((d >> 56) as u8);
        b.push(0);
        leb(&mut b, 1);
        leb(&mut b, 11);
        leb(&mut b, 1);
        leb(&mut b, key);
        b.push(3);
        leb(&mut b, text.len() as u64);
        b.extend_from_slice(text.as_bytes());
        record(&b)
    }

    fn event(value: u64, key: u64) -> Vec<u8> {
        let mut b = Vec::new();
        leb(&mut b, 20);
        leb(&mut b, value);
        leb(&mut b, key);
        record(&b)
    }

    /// A chunk: header, metadata, events, then checkpoints whose deltas
    /// `link` makes from their offsets; the header points at the last.
    fn chunk(checkpoints: &[(u64, &str)], link: impl Fn(&[usize], usize) -> i64) -> Vec<u8> {
        let meta = metadata();
        let mut body = meta.clone();
        body.extend(event(7, 1));
        body.extend(event(8, 2));
        // Lay the checkpoints out with placeholder deltas to learn their
        // offsets, then again with the real ones.
        let lay = |deltas: &[i64]| {
            let mut offsets = Vec::new();
            let mut out = Vec::new();
            for (i, (key, text)) in checkpoints.iter().enumerate() {
                offsets.push(HEADER_BYTES + body.len() + out.len());
                out.extend(checkpoint(deltas[i], *key, text));
            }
            (offsets, out)
        };
        let (offsets, _) = lay(&vec![-1; checkpoints.len()]);
        let deltas: Vec<i64> = (0..checkpoints.len()).map(|i| link(&offsets, i)).collect();
        let (offsets2, cps) = lay(&deltas);
        assert_eq!(offsets, offsets2);
        let size = HEADER_BYTES + body.len() + cps.len();
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&2u16.to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        for v in [
            size as i64,
            *offsets.last().unwrap() as i64,
            HEADER_BYTES as i64,
            1_000,
            0,
            0,
            1_000_000_000,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&[0, 0, 0, 1]);
        out.extend(body);
        out.extend(cps);
        assert_eq!(out.len(), size);
        out
    }

    fn parse(bytes: Vec<u8>) -> Result<Chunk> {
        let h = ChunkHeader::parse(&bytes).unwrap();
        Chunk::parse(h, bytes, None).map(|(c, _)| c)
    }

    /// Each checkpoint links back to the one before it.
    fn back(offsets: &[usize], i: usize) -> i64 {
        if i == 0 {
            0
        } else {
            offsets[i - 1] as i64 - offsets[i] as i64
        }
    }

    #[test]
    fn pools_of_every_checkpoint_in_the_chain_resolve() {
        let c = parse(chunk(&[(1, "first"), (2, "second")], back)).unwrap();
        let texts: Vec<(i64, String)> = c
            .events()
            .map(|e| {
                let (_, v) = c.decode(&e.unwrap()).unwrap();
                let n = c.int(c.field(&v, "value").unwrap()).unwrap();
                let t = c.string(c.field(&v, "text").unwrap()).unwrap().to_string();
                (n, t)
            })
            .collect();
        assert_eq!(texts, [(7, "first".into()), (8, "second".into())]);
    }

    #[test]
    fn a_newer_checkpoint_wins_over_an_older_one() {
        let c = parse(chunk(&[(1, "old"), (1, "new")], back)).unwrap();
        let e = c.events().next().unwrap().unwrap();
        let (_, v) = c.decode(&e).unwrap();
        assert_eq!(c.string(c.field(&v, "text").unwrap()), Some("new"));
    }

    /// Regression: a forged chain of two checkpoints pointing at each
    /// other was walked chunk/4 times, re-reading the pools each time.
    #[test]
    fn a_checkpoint_chain_that_loops_is_damage() {
        let looped = |o: &[usize], i: usize| o[1 - i] as i64 - o[i] as i64;
        let err = parse(chunk(&[(1, "a"), (2, "b")], looped)).err().unwrap();
        assert!(err.what.contains("loop"), "{err:?}");
    }

    #[test]
    fn a_checkpoint_outside_the_chunk_is_damage() {
        let out = |_: &[usize], _: usize| 1 << 40;
        let err = parse(chunk(&[(1, "a")], out)).err().unwrap();
        assert!(err.what.contains("outside the chunk"), "{err:?}");
    }
}
