/* The compiled twin of rocket_rebalance.runtime.transport.pulled: a pull answer's plain records straight into
 * Message objects, in one pass, without the StoredMessage in between.
 *
 * plain_messages(body: bytes, mq, message_type) -> tuple[Message, ...] | None
 *
 * "Plain" is what rocket_rebalance.remoting.message._decode_plain reads: V1 records with IPv4 hosts, sound, ports
 * in range, UTF-8 topic and properties, a body neither compressed nor an inner batch. When any record of the body
 * is anything else, this returns None and the caller decodes the whole body the pure way, which also reads the
 * other kinds and names what is wrong with a bad one. So for any bytes the result is the pure path's, or None:
 * tests/runtime/test_pulled.py holds both paths to that, the damaged and truncated bodies included.
 *
 * Each Message is what stored_message() makes of the record: message_type is the slotted dataclass Message, whose
 * slots (FIELD_NAMES, its fields in order) are filled in place, as its __init__ would fill them. Properties are
 * split as Java's string2messageProperties splits them (rocket_rebalance.remoting.message.decode_properties).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define FIXED_V4 88   /* TOTALSIZE .. BODYLEN of a record with IPv4 hosts */
#define MIN_RECORD 91 /* IPv4 hosts, empty body, topic and properties */
#define SYSFLAG_COMPRESSED 0x1
#define SYSFLAG_V6_HOSTS 0x30
#define SYSFLAG_INNER_BATCH 0xC0 /* INNER_BATCH | NEED_UNWRAP: split by unwrap_inner_batches */
#define MAX_PORT 65535

static PyObject *k_uniq_key, *k_tags_name, *k_keys_name, *empty;

/* Message's fields, in order; each a slot of the class, at an offset read from its member descriptor. */
enum { MQ, QUEUE_OFFSET, MSG_ID, BODY, TAGS, KEYS, PROPERTIES, COMMIT_LOG_OFFSET, RECONSUME_TIMES, BORN_TIMESTAMP_MS,
       STORE_TIMESTAMP_MS, BODY_ERROR, NAMESPACE, FIELDS };
static const char *FIELD_NAMES[FIELDS] = {"mq", "queue_offset", "msg_id", "body", "tags", "keys", "properties",
    "commit_log_offset", "reconsume_times", "born_timestamp_ms", "store_timestamp_ms", "body_error", "namespace"};
static PyTypeObject *slotted_type; /* the type slot_offset was read from (a strong reference) */
static Py_ssize_t slot_offset[FIELDS];

/* Whether ``type`` has exactly FIELD_NAMES as its slots, reading their offsets; else a TypeError. */
static int read_slots(PyTypeObject *type) {
    if (type == slotted_type) {
        return 0;
    }
    PyObject *slots = PyObject_GetAttrString((PyObject *)type, "__slots__");
    int sound = slots != NULL && PyTuple_Check(slots) && PyTuple_GET_SIZE(slots) == FIELDS;
    Py_XDECREF(slots);
    PyErr_Clear();
    Py_ssize_t offsets[FIELDS];
    for (int i = 0; sound && i < FIELDS; i++) {
        PyObject *member = PyObject_GetAttrString((PyObject *)type, FIELD_NAMES[i]);
        PyErr_Clear();
        sound = member != NULL && Py_TYPE(member) == &PyMemberDescr_Type &&
                ((PyMemberDescrObject *)member)->d_member->type == T_OBJECT_EX;
        if (sound) {
            offsets[i] = ((PyMemberDescrObject *)member)->d_member->offset;
        }
        Py_XDECREF(member);
    }
    if (!sound) {
        PyErr_Format(PyExc_TypeError, "plain_messages: %.200s is not a slotted Message", type->tp_name);
        return -1;
    }
    memcpy(slot_offset, offsets, sizeof offsets);
    Py_INCREF(type);
    Py_XSETREF(slotted_type, type);
    return 0;
}

static int32_t i32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]);
}

static int64_t i64(const unsigned char *p) {
    return (int64_t)((uint64_t)(uint32_t)i32(p) << 32 | (uint64_t)(uint32_t)i32(p + 4));
}

/* Short strings met before, by kind: property names repeat in every message of an answer, and so do many values
 * ("true", a tag, a region). Each cache fills with the first ones met and keeps them for the module's life; a
 * string from it needs no allocation and has its hash already. Used under the GIL only (the module does not
 * declare itself free-threading safe, so a free-threaded Python runs it with the GIL on). */
#define CACHED_MAX_LENGTH 24
#define CACHE_SIZE 32
typedef struct {
    PyObject *strings[CACHE_SIZE];
    int count;
} StringCache;
static StringCache names_cache, values_cache;

/* An ASCII string of n bytes at p, from ``cache`` when it holds it. */
static PyObject *ascii_string(StringCache *cache, const char *p, Py_ssize_t n) {
    if (n <= CACHED_MAX_LENGTH) {
        for (int i = 0; i < cache->count; i++) {
            PyObject *known = cache->strings[i];
            if (PyUnicode_GET_LENGTH(known) == n && memcmp(PyUnicode_1BYTE_DATA(known), p, (size_t)n) == 0) {
                Py_INCREF(known);
                return known;
            }
        }
    }
    PyObject *string = PyUnicode_New(n, 127);
    if (string == NULL) {
        return NULL;
    }
    memcpy(PyUnicode_1BYTE_DATA(string), p, (size_t)n);
    if (n <= CACHED_MAX_LENGTH && cache->count < CACHE_SIZE) {
        if (PyObject_Hash(string) == -1) {
            Py_DECREF(string);
            return NULL;
        }
        Py_INCREF(string);
        cache->strings[cache->count++] = string;
    }
    return string;
}

/* Java's string2messageProperties over the properties' UTF-8 bytes (sound: checked before): segments split at
 * \x02, each split at its first \x01 (bytes no multi-byte character contains); a segment without one, or with an
 * empty name or value, is skipped; a later name wins. ASCII text (what producers almost always write) is cut from
 * the bytes as it is, its names and common values from the caches. */
static PyObject *properties_of(const char *text, Py_ssize_t length, int ascii) {
    PyObject *properties = PyDict_New();
    if (properties == NULL) {
        return NULL;
    }
    const char *end = text + length;
    const char *start = text;
    while (start <= end) {
        const char *stop = memchr(start, 0x02, (size_t)(end - start));
        if (stop == NULL) {
            stop = end;
        }
        const char *separator = memchr(start, 0x01, (size_t)(stop - start));
        if (separator != NULL && separator > start && separator + 1 < stop) {
            Py_ssize_t name_length = separator - start, value_length = stop - separator - 1;
            PyObject *name = ascii ? ascii_string(&names_cache, start, name_length)
                                   : PyUnicode_DecodeUTF8(start, name_length, NULL);
            if (name == NULL) {
                goto fail;
            }
            PyObject *value = ascii ? ascii_string(&values_cache, separator + 1, value_length)
                                    : PyUnicode_DecodeUTF8(separator + 1, value_length, NULL);
            if (value == NULL) {
                Py_DECREF(name);
                goto fail;
            }
            int failed = PyDict_SetItem(properties, name, value);
            Py_DECREF(name);
            Py_DECREF(value);
            if (failed) {
                goto fail;
            }
        }
        start = stop + 1;
    }
    return properties;
fail:
    Py_DECREF(properties);
    return NULL;
}

static int is_ascii(const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] & 0x80) {
            return 0;
        }
    }
    return 1;
}

/* MessageDecoder.createMessageId for an IPv4 store host: address, port and commit-log offset in upper-case hex. */
static PyObject *offset_msg_id(const unsigned char *address, int32_t port, int64_t commit_log_offset) {
    static const char hex[] = "0123456789ABCDEF";
    unsigned char raw[16];
    char text[32];
    memcpy(raw, address, 4);
    for (int i = 0; i < 4; i++) {
        raw[4 + i] = (unsigned char)((uint32_t)port >> (24 - 8 * i));
    }
    for (int i = 0; i < 8; i++) {
        raw[8 + i] = (unsigned char)((uint64_t)commit_log_offset >> (56 - 8 * i));
    }
    for (int i = 0; i < 16; i++) {
        text[2 * i] = hex[raw[i] >> 4];
        text[2 * i + 1] = hex[raw[i] & 0xF];
    }
    return PyUnicode_FromStringAndSize(text, 32);
}

/* One plain record's Message, *next set past it; NULL with no exception set when the record is not plain. */
static PyObject *record(const unsigned char *data, Py_ssize_t size, Py_ssize_t start, PyObject *mq,
                        PyObject *message_type, Py_ssize_t *next, PyObject **topic_seen) {
    if (size - start < FIXED_V4) {
        return NULL;
    }
    const unsigned char *r = data + start;
    int64_t total = i32(r);
    int32_t magic = i32(r + 4);
    int32_t sys_flag = i32(r + 36);
    int32_t born_port = i32(r + 52);
    int32_t store_port = i32(r + 68);
    int64_t body_length = i32(r + 84);
    int64_t end = (int64_t)start + total;
    int64_t position = (int64_t)start + FIXED_V4 + body_length;
    if ((sys_flag & SYSFLAG_V6_HOSTS) || magic != MAGIC_V1 || total < MIN_RECORD || end > (int64_t)size ||
        body_length < 0 || position + 3 > end || born_port < 0 || born_port > MAX_PORT || store_port < 0 ||
        store_port > MAX_PORT) {
        return NULL;
    }
    if ((sys_flag & SYSFLAG_COMPRESSED) && body_length > 0) {
        return NULL; /* inflated by the pure path */
    }
    if ((sys_flag & SYSFLAG_INNER_BATCH) == SYSFLAG_INNER_BATCH) {
        return NULL; /* split by the pure path */
    }
    unsigned char topic_length = data[position];
    if (topic_length >= 0x80) {
        return NULL;
    }
    int64_t topic_start = position + 1;
    position = topic_start + topic_length;
    if (position + 2 > end) {
        return NULL;
    }
    if (data[position] >= 0x80 || position + 2 + ((int64_t)data[position] << 8 | data[position + 1]) != end) {
        return NULL;
    }
    /* The record's topic is not a Message field (the queue names it), but the pure decoder refuses a record whose
     * topic is not UTF-8; it repeats through an answer, so only a new one is checked. */
    if (*topic_seen == NULL || PyBytes_GET_SIZE(*topic_seen) != topic_length ||
        memcmp(PyBytes_AS_STRING(*topic_seen), data + topic_start, topic_length) != 0) {
        PyObject *topic = PyUnicode_DecodeUTF8((const char *)data + topic_start, topic_length, NULL);
        if (topic == NULL) {
            PyErr_Clear();
            return NULL;
        }
        Py_DECREF(topic);
        Py_XSETREF(*topic_seen, PyBytes_FromStringAndSize((const char *)data + topic_start, topic_length));
        if (*topic_seen == NULL) {
            return NULL;
        }
    }
    const unsigned char *raw = data + position + 2;
    Py_ssize_t raw_length = (Py_ssize_t)(end - position - 2);
    int ascii = is_ascii(raw, raw_length);
    if (!ascii) { /* the pure decoder refuses the record when any of its properties' bytes is not UTF-8 */
        PyObject *text = PyUnicode_DecodeUTF8((const char *)raw, raw_length, NULL);
        if (text == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
            }
            return NULL;
        }
        Py_DECREF(text);
    }
    PyObject *properties = properties_of((const char *)raw, raw_length, ascii);
    if (properties == NULL) {
        return NULL;
    }
    PyObject *uniq_key = PyDict_GetItemWithError(properties, k_uniq_key);
    PyObject *tags = PyDict_GetItemWithError(properties, k_tags_name);
    PyObject *keys = PyDict_GetItemWithError(properties, k_keys_name);
    if (PyErr_Occurred()) {
        Py_DECREF(properties);
        return NULL;
    }
    PyObject *message = ((PyTypeObject *)message_type)->tp_alloc((PyTypeObject *)message_type, 0);
    if (message == NULL) {
        Py_DECREF(properties);
        return NULL;
    }
    PyObject **slot[FIELDS];
    for (int i = 0; i < FIELDS; i++) {
        slot[i] = (PyObject **)((char *)message + slot_offset[i]);
    }
    *slot[MQ] = Py_NewRef(mq);
    *slot[QUEUE_OFFSET] = PyLong_FromLongLong(i64(r + 20));
    *slot[MSG_ID] = uniq_key != NULL ? Py_NewRef(uniq_key) : offset_msg_id(r + 64, store_port, i64(r + 28));
    *slot[BODY] = PyBytes_FromStringAndSize((const char *)r + FIXED_V4, (Py_ssize_t)body_length);
    *slot[TAGS] = Py_NewRef(tags != NULL ? tags : empty);
    *slot[KEYS] = Py_NewRef(keys != NULL ? keys : empty);
    *slot[PROPERTIES] = properties;
    *slot[COMMIT_LOG_OFFSET] = PyLong_FromLongLong(i64(r + 28));
    *slot[RECONSUME_TIMES] = PyLong_FromLong(i32(r + 72));
    *slot[BORN_TIMESTAMP_MS] = PyLong_FromLongLong(i64(r + 40));
    *slot[STORE_TIMESTAMP_MS] = PyLong_FromLongLong(i64(r + 56));
    *slot[BODY_ERROR] = Py_NewRef(empty);
    *slot[NAMESPACE] = Py_NewRef(Py_None);
    for (int i = 0; i < FIELDS; i++) {
        if (*slot[i] == NULL) { /* out of memory: the exception is set */
            Py_DECREF(message);
            return NULL;
        }
    }
    *next = (Py_ssize_t)end;
    return message;
}

static PyObject *plain_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyBytes_Check(args[0]) || !PyType_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "plain_messages(body: bytes, mq, message_type: type)");
        return NULL;
    }
    if (read_slots((PyTypeObject *)args[2]) < 0) {
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    PyObject *messages = PyList_New(0);
    if (messages == NULL) {
        return NULL;
    }
    PyObject *topic_seen = NULL;
    Py_ssize_t start = 0;
    while (start < size) {
        Py_ssize_t next = start;
        PyObject *message = record(data, size, start, args[1], args[2], &next, &topic_seen);
        if (message == NULL) {
            Py_XDECREF(topic_seen);
            Py_DECREF(messages);
            if (PyErr_Occurred()) {
                return NULL;
            }
            Py_RETURN_NONE; /* not plain: the pure path reads (or refuses) the whole body */
        }
        int failed = PyList_Append(messages, message);
        Py_DECREF(message);
        if (failed) {
            Py_XDECREF(topic_seen);
            Py_DECREF(messages);
            return NULL;
        }
        start = next;
    }
    Py_XDECREF(topic_seen);
    PyObject *result = PyList_AsTuple(messages);
    Py_DECREF(messages);
    return result;
}

static PyMethodDef methods[] = {
    {"plain_messages", (PyCFunction)(void (*)(void))plain_messages, METH_FASTCALL,
     "A pull answer's records as Messages when every record is plain, else None (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pulled", NULL, -1, methods};

static int intern(PyObject **slot, const char *text) {
    *slot = PyUnicode_InternFromString(text);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__pulled(void) {
    if (intern(&k_uniq_key, "UNIQ_KEY") || intern(&k_tags_name, "TAGS") || intern(&k_keys_name, "KEYS") ||
        intern(&empty, "")) {
        return NULL;
    }
    return PyModule_Create(&module);
}
