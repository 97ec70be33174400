package io.ibdxnet.metrics;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.AttributeNotFoundException;
import javax.management.DynamicMBean;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanInfo;
import javax.management.MBeanOperationInfo;
import javax.management.ReflectionException;

/**
 * A read-only MBean whose attributes are the entries of a counter map, read
 * afresh on every access (names as in {@code DXNet.transportStats}, values
 * {@code long}).
 */
final class CounterBean implements DynamicMBean {
    private final String description;
    private final Supplier<Map<String, Long>> counters;

    CounterBean(String description, Supplier<Map<String, Long>> counters) {
        this.description = description;
        this.counters = counters;
    }

    @Override
    public Object getAttribute(String name) throws AttributeNotFoundException {
        Long v = counters.get().get(name);
        if (v == null) {
            throw new AttributeNotFoundException(name);
        }
        return v;
    }

    @Override
    public void setAttribute(Attribute attribute) throws AttributeNotFoundException {
        throw new AttributeNotFoundException(attribute.getName() + " is read-only");
    }

    @Override
    public AttributeList getAttributes(String[] names) {
        Map<String, Long> m = counters.get();
        AttributeList out = new AttributeList();
        for (String n : names) {
            Long v = m.get(n);
            if (v != null) {
                out.add(new Attribute(n, v));
            }
        }
        return out;
    }

    @Override
    public AttributeList setAttributes(AttributeList attributes) {
        return new AttributeList();
    }

    @Override
    public Object invoke(String action, Object[] params, String[] signature) throws ReflectionException {
        throw new ReflectionException(new NoSuchMethodException(action), "no operations");
    }

    @Override
    public MBeanInfo getMBeanInfo() {
        List<MBeanAttributeInfo> attrs = new ArrayList<>();
        for (String n : counters.get().keySet()) {
            attrs.add(new MBeanAttributeInfo(n, "long", n, true, false, false));
        }
        return new MBeanInfo(CounterBean.class.getName(), description, attrs.toArray(new MBeanAttributeInfo[0]), null,
                new MBeanOperationInfo[0], null);
    }
}
