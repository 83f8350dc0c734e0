import CouchCore
import Foundation

/// `_approx_count_distinct`'s sketch, as CouchDB 3 keeps it (`couch_hyper`, adapted from
/// GameAnalytics' `hyper`): HyperLogLog with precision 11 (2,048 six-bit registers), each key
/// hashed as the SHA-1 of its Erlang term (`term_to_binary(Key, [{minor_version, 1}])`, the key
/// as jiffy decodes it; `{p, Partition, Key}` in a partitioned view), the estimate corrected by
/// the same bias tables. Equal keys give equal registers, so Couchette answers what CouchDB
/// answers. Sketches of disjoint runs of rows merge by taking each register's maximum, which
/// is what lets the index keep one per stored reduction.
struct HyperLogLog {
    static let precision = 11
    static let registerCount = 1 << precision
    /// The registers set, by index, while few are (most stored reductions cover a few rows);
    /// all of them (`dense`) past a third.
    private var sparse: [Int: UInt8] = [:]
    private var dense: [UInt8]?

    init() {}

    /// Every register's value.
    var registers: [UInt8] {
        if let dense { return dense }
        var all = [UInt8](repeating: 0, count: Self.registerCount)
        for (index, value) in sparse { all[index] = value }
        return all
    }

    /// Adds a key (its JSON) to the sketch; `partition` for a partitioned view's key.
    mutating func insert(keyJSON: [UInt8], partition: String?) {
        let key = (try? JSONValue.parse(keyJSON)) ?? .null
        var term = ExternalTermWriter()
        if let partition {
            term.tupleHeader(3)
            term.atom("p")
            term.binary(partition)
        }
        term.json(key)
        insert(hash: Digest.sha1(term.bytes))
    }

    /// The register is the hash's first 11 bits; its value one more than the zeros that lead
    /// the next 53.
    mutating func insert(hash: [UInt8]) {
        var word: UInt64 = 0
        for byte in hash.prefix(8) { word = word << 8 | UInt64(byte) }
        let rest = word << UInt64(Self.precision)   // the 53 bits, then zeros
        set(Int(word >> UInt64(64 - Self.precision)), UInt8(min(rest.leadingZeroBitCount, 64 - Self.precision) + 1))
    }

    private mutating func set(_ index: Int, _ value: UInt8) {
        if dense != nil {
            if value > dense![index] { dense![index] = value }
            return
        }
        if value > sparse[index] ?? 0 { sparse[index] = value }
        if sparse.count * 3 >= Self.registerCount {
            dense = registers
            sparse = [:]
        }
    }

    mutating func merge(_ other: HyperLogLog) {
        if let registers = other.dense {
            for (index, value) in registers.enumerated() where value != 0 { set(index, value) }
        } else {
            for (index, value) in other.sparse { set(index, value) }
        }
    }

    /// `couch_hyper:card/1`, rounded as `finalize` rounds it; the same arithmetic in the same
    /// order, so the answer is CouchDB's to the unit.
    var cardinality: Int {
        let m = Double(Self.registerCount)
        let zeros = dense.map { $0.reduce(0) { $0 + ($1 == 0 ? 1 : 0) } } ?? Self.registerCount - sparse.count
        // Linear counting answers while it stays under the threshold (a few keys, as most
        // groups have): CouchDB computes the other estimate too, but does not use it then.
        let linear = zeros == 0 ? nil : m * log(m / Double(zeros))
        if let linear, linear <= 1800 { return Int(linear.rounded()) }
        var registerSum = 0.0
        for value in registers { registerSum += Double(sign: .plus, exponent: -Int(value), significand: 1) }
        let alpha = 0.7213 / (1 + 1.079 / m)
        let estimate = alpha * (m * m) / registerSum
        let corrected = estimate <= 5 * m ? estimate - Self.bias(estimate) : estimate
        return Int(corrected.rounded())
    }

    // MARK: Stored form

    /// `S` then (index, value) triples in index order while few registers are set; otherwise
    /// `D` then every register.
    var encoded: [UInt8] {
        if let dense { return [UInt8(ascii: "D")] + dense }
        var bytes: [UInt8] = [UInt8(ascii: "S")]
        bytes.reserveCapacity(1 + sparse.count * 3)
        for (index, value) in sparse.sorted(by: { $0.key < $1.key }) {
            bytes += [UInt8(index >> 8), UInt8(index & 0xFF), value]
        }
        return bytes
    }

    init?(encoded bytes: [UInt8]) {
        guard let tag = bytes.first else { return nil }
        if tag == UInt8(ascii: "D"), bytes.count == 1 + Self.registerCount {
            dense = Array(bytes.dropFirst())
        } else if tag == UInt8(ascii: "S"), (bytes.count - 1) % 3 == 0 {
            var offset = 1
            while offset < bytes.count {
                let index = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
                guard index < Self.registerCount else { return nil }
                set(index, bytes[offset + 2])
                offset += 3
            }
        } else {
            return nil
        }
    }

    /// The mean bias of the six estimates nearest `estimate` (ties in table order, summed
    /// nearest first, as `lists:keysort` and `lists:sum` do).
    private static func bias(_ estimate: Double) -> Double {
        var distances: [(distance: Double, index: Int)] = []
        for index in estimates.indices {
            let difference = estimate - estimates[index]
            distances.append((difference * difference, index))
        }
        let nearest = distances.sorted { a, b in a.distance < b.distance || (a.distance == b.distance && a.index < b.index) }.prefix(6)
        var sum = 0.0
        for entry in nearest { sum += biases[entry.index] }
        return sum / Double(nearest.count)
    }

    // MARK: CouchDB's tables for precision 11 (couch_hyper.erl, Apache License 2.0)

    static let estimates: [Double] = [
        1477, 1501.6014, 1526.5802, 1551.7942, 1577.3042, 1603.2062, 1629.8402, 1656.2292, 1682.9462, 1709.9926,
        1737.3026, 1765.4252, 1793.0578, 1821.6092, 1849.626, 1878.5568, 1908.527, 1937.5154, 1967.1874, 1997.3878,
        2027.37, 2058.1972, 2089.5728, 2120.1012, 2151.9668, 2183.292, 2216.0772, 2247.8578, 2280.6562, 2313.041,
        2345.714, 2380.3112, 2414.1806, 2447.9854, 2481.656, 2516.346, 2551.5154, 2586.8378, 2621.7448, 2656.6722,
        2693.5722, 2729.1462, 2765.4124, 2802.8728, 2838.898, 2876.408, 2913.4926, 2951.4938, 2989.6776, 3026.282,
        3065.7704, 3104.1012, 3143.7388, 3181.6876, 3221.1872, 3261.5048, 3300.0214, 3339.806, 3381.409, 3421.4144,
        3461.4294, 3502.2286, 3544.651, 3586.6156, 3627.337, 3670.083, 3711.1538, 3753.5094, 3797.01, 3838.6686,
        3882.1678, 3922.8116, 3967.9978, 4009.9204, 4054.3286, 4097.5706, 4140.6014, 4185.544, 4229.5976, 4274.583,
        4316.9438, 4361.672, 4406.2786, 4451.8628, 4496.1834, 4543.505, 4589.1816, 4632.5188, 4678.2294, 4724.8908,
        4769.0194, 4817.052, 4861.4588, 4910.1596, 4956.4344, 5002.5238, 5048.13, 5093.6374, 5142.8162, 5187.7894,
        5237.3984, 5285.6078, 5331.0858, 5379.1036, 5428.6258, 5474.6018, 5522.7618, 5571.5822, 5618.59, 5667.9992,
        5714.88, 5763.454, 5808.6982, 5860.3644, 5910.2914, 5953.571, 6005.9232, 6055.1914, 6104.5882, 6154.5702,
        6199.7036, 6251.1764, 6298.7596, 6350.0302, 6398.061, 6448.4694, 6495.933, 6548.0474, 6597.7166, 6646.9416,
        6695.9208, 6742.6328, 6793.5276, 6842.1934, 6894.2372, 6945.3864, 6996.9228, 7044.2372, 7094.1374, 7142.2272,
        7192.2942, 7238.8338, 7288.9006, 7344.0908, 7394.8544, 7443.5176, 7490.4148, 7542.9314, 7595.6738, 7641.9878,
        7694.3688, 7743.0448, 7797.522, 7845.53, 7899.594, 7950.3132, 7996.455, 8050.9442, 8092.9114, 8153.1374,
        8197.4472, 8252.8278, 8301.8728, 8348.6776, 8401.4698, 8453.551, 8504.6598, 8553.8944, 8604.1276, 8657.6514,
        8710.3062, 8758.908, 8807.8706, 8862.1702, 8910.4668, 8960.77, 9007.2766, 9063.164, 9121.0534, 9164.1354,
        9218.1594, 9267.767, 9319.0594, 9372.155, 9419.7126, 9474.3722, 9520.1338, 9572.368, 9622.7702, 9675.8448,
        9726.5396, 9778.7378, 9827.6554, 9878.1922, 9928.7782, 9978.3984, 10026.578, 10076.5626, 10137.1618,
        10177.5244, 10229.9176,
    ]

    static let biases: [Double] = [
        1476, 1449.6014, 1423.5802, 1397.7942, 1372.3042, 1347.2062, 1321.8402, 1297.2292, 1272.9462, 1248.9926,
        1225.3026, 1201.4252, 1178.0578, 1155.6092, 1132.626, 1110.5568, 1088.527, 1066.5154, 1045.1874, 1024.3878,
        1003.37, 982.1972, 962.5728, 942.1012, 922.9668, 903.292, 884.0772, 864.8578, 846.6562, 828.041, 809.714,
        792.3112, 775.1806, 757.9854, 740.656, 724.346, 707.5154, 691.8378, 675.7448, 659.6722, 645.5722, 630.1462,
        614.4124, 600.8728, 585.898, 572.408, 558.4926, 544.4938, 531.6776, 517.282, 505.7704, 493.1012, 480.7388,
        467.6876, 456.1872, 445.5048, 433.0214, 420.806, 411.409, 400.4144, 389.4294, 379.2286, 369.651, 360.6156,
        350.337, 342.083, 332.1538, 322.5094, 315.01, 305.6686, 298.1678, 287.8116, 280.9978, 271.9204, 265.3286,
        257.5706, 249.6014, 242.544, 235.5976, 229.583, 220.9438, 214.672, 208.2786, 201.8628, 195.1834, 191.505,
        186.1816, 178.5188, 172.2294, 167.8908, 161.0194, 158.052, 151.4588, 148.1596, 143.4344, 138.5238, 133.13,
        127.6374, 124.8162, 118.7894, 117.3984, 114.6078, 109.0858, 105.1036, 103.6258, 98.6018000000004,
        95.7618000000002, 93.5821999999998, 88.5900000000001, 86.9992000000002, 82.8800000000001, 80.4539999999997,
        74.6981999999998, 74.3644000000004, 73.2914000000001, 65.5709999999999, 66.9232000000002, 65.1913999999997,
        62.5882000000001, 61.5702000000001, 55.7035999999998, 56.1764000000003, 52.7596000000003, 53.0302000000001,
        49.0609999999997, 48.4694, 44.933, 46.0474000000004, 44.7165999999997, 41.9416000000001, 39.9207999999999,
        35.6328000000003, 35.5276000000003, 33.1934000000001, 33.2371999999996, 33.3864000000003, 33.9228000000003,
        30.2371999999996, 29.1373999999996, 25.2272000000003, 24.2942000000003, 19.8338000000003, 18.9005999999999,
        23.0907999999999, 21.8544000000002, 19.5176000000001, 15.4147999999996, 16.9314000000004, 18.6737999999996,
        12.9877999999999, 14.3688000000002, 12.0447999999997, 15.5219999999999, 12.5299999999997, 14.5940000000001,
        14.3131999999996, 9.45499999999993, 12.9441999999999, 3.91139999999996, 13.1373999999996, 5.44720000000052,
        9.82779999999912, 7.87279999999919, 3.67760000000089, 5.46980000000076, 5.55099999999948, 5.65979999999945,
        3.89439999999922, 3.1275999999998, 5.65140000000065, 6.3062000000009, 3.90799999999945, 1.87060000000019,
        5.17020000000048, 2.46680000000015, 0.770000000000437, -3.72340000000077, 1.16400000000067, 8.05340000000069,
        0.135399999999208, 2.15940000000046, 0.766999999999825, 1.0594000000001, 3.15500000000065,
        -0.287399999999252, 2.37219999999979, -2.86620000000039, -1.63199999999961, -2.22979999999916,
        -0.15519999999924, -1.46039999999994, -0.262199999999211, -2.34460000000036, -2.8078000000005,
        -3.22179999999935, -5.60159999999996, -8.42200000000048, -9.43740000000071, 0.161799999999857,
        -10.4755999999998, -10.0823999999993,
    ]
}
