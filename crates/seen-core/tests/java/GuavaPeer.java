// The real Guava, driven by seen's tests: builds and reads Bloom filters
// with Guava's own BloomFilter and answers mightContain, so the tests can
// compare seen's answers with Guava's bit for bit.
//
//   build FILE N FPP STRATEGY      put items 0..N, writeTo FILE
//   probe FILE ITEMS PROBES ANSWERS readFrom FILE, mightContain of items
//                                  0..ITEMS then probes 0..PROBES, one byte
//                                  (0/1) each to ANSWERS; prints
//                                  approximateElementCount
//   sizes N FPP ...                prints "words hashes" per (N, FPP) pair
//   vectors LABEL                  golden vectors as JSON (hashes, small
//                                  files), LABEL naming the Guava that made them
//   bench N FPP                    put / mightContain ns per call on N
//                                  URL-like strings, JIT warmed
//
// Items and probes are the strings ITEM(i) and PROBE(i) below; seen's tests
// build the same ones. STRATEGY is MURMUR128_MITZ_64 (Guava's default) or
// MURMUR128_MITZ_32 (taken through reflection: Guava keeps it package
// private).

import com.google.common.hash.BloomFilter;
import com.google.common.hash.Funnel;
import com.google.common.hash.Funnels;
import java.io.*;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;

public class GuavaPeer {
    static final Funnel<CharSequence> FUNNEL = Funnels.stringFunnel(StandardCharsets.UTF_8);

    /** An added item: a URL with non-ASCII characters. */
    static String item(long i) {
        return "https://\u4f8b\u3048.jp/\u30da\u30fc\u30b8/" + i + "?q=\u00fc\u00df\ud834\udd1e";
    }

    /** A probe: never added (unless a test adds it on purpose). */
    static String probe(long i) {
        return "probe-" + i + "-\u00e9t\u00e9";
    }

    @SuppressWarnings("unchecked")
    static BloomFilter<CharSequence> create(long n, double fpp, String strategy) throws Exception {
        if (strategy.equals("MURMUR128_MITZ_64")) {
            return BloomFilter.create(FUNNEL, n, fpp);
        }
        Class<?> strategies = Class.forName("com.google.common.hash.BloomFilterStrategies");
        Object chosen = null;
        for (Object c : strategies.getEnumConstants()) {
            if (c.toString().equals(strategy)) chosen = c;
        }
        if (chosen == null) throw new IllegalArgumentException("no strategy " + strategy);
        Class<?> strategyType = Class.forName("com.google.common.hash.BloomFilter$Strategy");
        Method m = BloomFilter.class.getDeclaredMethod(
                "create", Funnel.class, long.class, double.class, strategyType);
        m.setAccessible(true);
        return (BloomFilter<CharSequence>) m.invoke(null, FUNNEL, n, fpp, chosen);
    }

    static BloomFilter<CharSequence> read(String path) throws IOException {
        try (InputStream in = new BufferedInputStream(new FileInputStream(path))) {
            return BloomFilter.readFrom(in, FUNNEL);
        }
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "build": {
                long n = Long.parseLong(args[2]);
                BloomFilter<CharSequence> f = create(n, Double.parseDouble(args[3]), args[4]);
                for (long i = 0; i < n; i++) f.put(item(i));
                try (OutputStream out = new BufferedOutputStream(new FileOutputStream(args[1]))) {
                    f.writeTo(out);
                }
                break;
            }
            case "probe": {
                BloomFilter<CharSequence> f = read(args[1]);
                long items = Long.parseLong(args[2]);
                long probes = Long.parseLong(args[3]);
                try (OutputStream out = new BufferedOutputStream(new FileOutputStream(args[4]))) {
                    for (long i = 0; i < items; i++) out.write(f.mightContain(item(i)) ? 1 : 0);
                    for (long i = 0; i < probes; i++) out.write(f.mightContain(probe(i)) ? 1 : 0);
                }
                System.out.println(f.approximateElementCount());
                break;
            }
            case "sizes": {
                for (int a = 1; a + 1 < args.length; a += 2) {
                    long n = Long.parseLong(args[a]);
                    double fpp = Double.parseDouble(args[a + 1]);
                    final byte[] head = new byte[6];
                    final int[] at = {0};
                    BloomFilter.create(FUNNEL, n, fpp).writeTo(new OutputStream() {
                        @Override public void write(int b) {
                            if (at[0] < 6) head[at[0]] = (byte) b;
                            at[0]++;
                        }
                    });
                    long words = ((head[2] & 0xffL) << 24) | ((head[3] & 0xffL) << 16)
                            | ((head[4] & 0xffL) << 8) | (head[5] & 0xffL);
                    System.out.println(words + " " + (head[1] & 0xff));
                }
                break;
            }
            case "vectors": {
                vectors(args[1]);
                break;
            }
            case "bench": {
                bench(Long.parseLong(args[1]), Double.parseDouble(args[2]));
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String hex(byte[] bytes) {
        StringBuilder b = new StringBuilder();
        for (byte x : bytes) b.append(String.format("%02x", x & 0xff));
        return b.toString();
    }

    /** Golden vectors: MurmurHash3 of a few strings, whole small files. */
    static void vectors(String label) throws Exception {
        String[] items = {"", "a", "hello", "https://example.com/", "\u4f8b\u3048 \ud834\udd1e"};
        StringBuilder out = new StringBuilder("{\n  \"made_by\": " + json(label) + ",\n");
        out.append("  \"murmur3_128\": [\n");
        for (int i = 0; i < items.length; i++) {
            out.append("    {\"item\": ").append(json(items[i])).append(", \"hash\": \"")
               .append(com.google.common.hash.Hashing.murmur3_128().hashString(items[i], StandardCharsets.UTF_8))
               .append(i + 1 < items.length ? "\"},\n" : "\"}\n");
        }
        out.append("  ],\n  \"files\": [\n");
        Object[][] cases = {
            {3L, 0.01, "MURMUR128_MITZ_64"},
            {5L, 0.03, "MURMUR128_MITZ_32"},
            {20L, 0.001, "MURMUR128_MITZ_64"},
        };
        for (int c = 0; c < cases.length; c++) {
            long n = (Long) cases[c][0];
            double fpp = (Double) cases[c][1];
            String strategy = (String) cases[c][2];
            BloomFilter<CharSequence> f = create(n, fpp, strategy);
            StringBuilder added = new StringBuilder();
            for (int i = 0; i < items.length; i++) {
                f.put(items[i]);
                added.append(json(items[i])).append(i + 1 < items.length ? ", " : "");
            }
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            f.writeTo(bytes);
            out.append("    {\"capacity\": ").append(n).append(", \"fpp\": ").append(fpp)
               .append(", \"strategy\": \"").append(strategy).append("\", \"items\": [")
               .append(added).append("], \"approximate_element_count\": ")
               .append(f.approximateElementCount()).append(",\n     \"file\": \"")
               .append(hex(bytes.toByteArray())).append(c + 1 < cases.length ? "\"},\n" : "\"}\n");
        }
        out.append("  ]\n}");
        System.out.println(out);
    }

    /** The URL-like items of seen's core benchmark. */
    static String url(long i) {
        return "https://example.com/articles/" + i + "/comments?page=" + (i % 97);
    }

    static void bench(long n, double fpp) {
        String[] items = new String[(int) n];
        String[] absent = new String[(int) n];
        for (int i = 0; i < n; i++) {
            items[i] = url(i);
            absent[i] = url(n + i);
        }
        long sink = 0;
        // Warm the JIT on a filter of its own, then time one run.
        for (int round = 0; round < 2; round++) {
            BloomFilter<CharSequence> f = BloomFilter.create(FUNNEL, n, fpp);
            long t0 = System.nanoTime();
            for (String s : items) f.put(s);
            long t1 = System.nanoTime();
            for (String s : items) sink += f.mightContain(s) ? 1 : 0;
            long t2 = System.nanoTime();
            for (String s : absent) sink += f.mightContain(s) ? 1 : 0;
            long t3 = System.nanoTime();
            if (round == 1) {
                System.out.printf("put %.1f ns, present %.1f ns, absent %.1f ns (sink %d)%n",
                        (t1 - t0) / (double) n, (t2 - t1) / (double) n, (t3 - t2) / (double) n, sink);
            }
        }
    }
}
